package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
)

// TestAliasNamespace: state written for one emulator address is kept under
// the alias, so a run on another port finds it, and it is handed back under
// the address the caller uses.
func TestAliasNamespace(t *testing.T) {
	ctx := context.Background()
	fs := newFileStore(t)
	first := checkpoint.AliasNamespace(fs, "127.0.0.1:40001", "emulator")
	seq, off := int64(41), "4100"
	cp := azeventhubs.Checkpoint{FullyQualifiedNamespace: "127.0.0.1:40001", EventHubName: "orders", ConsumerGroup: "$Default",
		PartitionID: "0", SequenceNumber: &seq, Offset: &off}
	if err := first.SetCheckpoint(ctx, cp, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(fs.Dir(), "emulator", "orders", "$Default", "checkpoint", "0")); err != nil {
		t.Fatalf("checkpoint not kept under the alias: %v", err)
	}
	claimed, err := first.ClaimOwnership(ctx, []azeventhubs.Ownership{{FullyQualifiedNamespace: "127.0.0.1:40001",
		EventHubName: "orders", ConsumerGroup: "$Default", PartitionID: "0", OwnerID: "a"}}, nil)
	if err != nil || len(claimed) != 1 || claimed[0].FullyQualifiedNamespace != "127.0.0.1:40001" {
		t.Fatalf("ClaimOwnership = %+v, %v; want the claim back under the caller's namespace", claimed, err)
	}

	second := checkpoint.AliasNamespace(fs, "127.0.0.1:40002", "emulator") // the next run's port
	cps, err := second.ListCheckpoints(ctx, "127.0.0.1:40002", "orders", "$Default", nil)
	if err != nil || len(cps) != 1 || *cps[0].SequenceNumber != 41 || cps[0].FullyQualifiedNamespace != "127.0.0.1:40002" {
		t.Fatalf("ListCheckpoints on the next port = %+v, %v; want seq 41 under 127.0.0.1:40002", cps, err)
	}
	owns, err := second.ListOwnership(ctx, "127.0.0.1:40002", "orders", "$Default", nil)
	if err != nil || len(owns) != 1 || owns[0].OwnerID != "a" || owns[0].FullyQualifiedNamespace != "127.0.0.1:40002" {
		t.Fatalf("ListOwnership on the next port = %+v, %v", owns, err)
	}
}
