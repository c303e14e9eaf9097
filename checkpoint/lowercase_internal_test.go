package checkpoint

import (
	"context"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// racingStore is a FileStore on which another replica writes a lowercase
// checkpoint right after Lowercase has listed the lowercase names and before
// it migrates the as-written one.
type racingStore struct {
	*FileStore
	newer azeventhubs.Checkpoint
}

func (r *racingStore) ListCheckpoints(ctx context.Context, ns, eh, cg string, o *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	if cg != strings.ToLower(cg) && r.newer.PartitionID != "" {
		if err := r.FileStore.SetCheckpoint(ctx, r.newer, nil); err != nil {
			return nil, err
		}
		r.newer = azeventhubs.Checkpoint{}
	}
	return r.FileStore.ListCheckpoints(ctx, ns, eh, cg, o)
}

// TestLowercaseMigrationNeverMovesBack: the migration is a create-if-absent,
// so the newer lowercase checkpoint written in between survives and is what
// ListCheckpoints returns.
func TestLowercaseMigrationNeverMovesBack(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	seq, off := int64(10), "1000"
	if err := fs.SetCheckpoint(ctx, azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "$Default", PartitionID: "0", SequenceNumber: &seq, Offset: &off}, nil); err != nil {
		t.Fatal(err)
	}
	newSeq, newOff := int64(99), "9900"
	rs := &racingStore{FileStore: fs, newer: azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "$default", PartitionID: "0", SequenceNumber: &newSeq, Offset: &newOff}}

	got, err := Lowercase(rs, nil).ListCheckpoints(ctx, "ns", "hub", "$Default", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || *got[0].SequenceNumber != 99 || got[0].ConsumerGroup != "$Default" {
		t.Fatalf("ListCheckpoints = %+v, want partition 0 at 99 (the newer lowercase checkpoint) with the caller's names", got)
	}
	stored, _ := fs.ListCheckpoints(ctx, "ns", "hub", "$default", nil)
	if len(stored) != 1 || *stored[0].SequenceNumber != 99 {
		t.Fatalf("lowercase checkpoint = %+v, want 99 kept", stored)
	}
}

func TestFileStoreCreateCheckpoint(t *testing.T) {
	ctx := context.Background()
	fs, err := NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := func(seq int64) azeventhubs.Checkpoint {
		off := "x"
		return azeventhubs.Checkpoint{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "cg", PartitionID: "0", SequenceNumber: &seq, Offset: &off}
	}
	for i, tt := range []struct {
		seq         int64
		wantCreated bool
	}{{1, true}, {2, false}} {
		created, err := fs.createCheckpoint(ctx, cp(tt.seq))
		if err != nil || created != tt.wantCreated {
			t.Fatalf("createCheckpoint #%d = %v, %v; want %v", i+1, created, err, tt.wantCreated)
		}
	}
	got, _ := fs.ListCheckpoints(ctx, "ns", "hub", "cg", nil)
	if len(got) != 1 || *got[0].SequenceNumber != 1 {
		t.Fatalf("checkpoint = %+v, want the first one kept", got)
	}
}
