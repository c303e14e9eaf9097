package checkpoint_test

import (
	"context"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestReadLease: each store, bare and behind the lowercase and namespace
// alias wrappers, reads one partition's lease as ListOwnership lists it:
// the owner written last, none for a partition never claimed.
func TestReadLease(t *testing.T) {
	ctx := context.Background()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			bare, _ := kind.new(t)
			for _, store := range []azeventhubs.CheckpointStore{bare, checkpoint.AliasNamespace(checkpoint.Lowercase(bare, nil), "Actual:5672", "alias")} {
				ns := "Actual:5672"
				if store == bare {
					ns = "ns"
				}
				o := azeventhubs.Ownership{FullyQualifiedNamespace: ns, EventHubName: "Orders", ConsumerGroup: "$Default", PartitionID: "3", OwnerID: "a"}
				won, err := store.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, nil)
				if err != nil || len(won) != 1 {
					t.Fatalf("claim: %v, %v", won, err)
				}
				o = won[0]
				o.OwnerID = "b"
				if won, err = store.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, nil); err != nil || len(won) != 1 {
					t.Fatalf("second claim: %v, %v", won, err)
				}
				got, found, ok, err := checkpoint.ReadLease(ctx, store, ns, "Orders", "$Default", "3")
				if err != nil || !ok || !found {
					t.Fatalf("ReadLease: found %v, supported %v, %v", found, ok, err)
				}
				if got.OwnerID != "b" || got.PartitionID != "3" || got.FullyQualifiedNamespace != ns || got.ETag == nil || *got.ETag != *won[0].ETag {
					t.Fatalf("ReadLease: %+v, want owner b with the etag of the last claim %v", got, *won[0].ETag)
				}
				if _, found, _, err := checkpoint.ReadLease(ctx, store, ns, "Orders", "$Default", "4"); err != nil || found {
					t.Fatalf("ReadLease of a partition never claimed: found %v, %v", found, err)
				}
			}
		})
	}
}

// TestBlobRequestsCounted: every request the Blob store sends is reported
// with its operation, and reading one lease is a read, not a list.
func TestBlobRequestsCounted(t *testing.T) {
	ctx := context.Background()
	az := testenv.Azurite(t)
	var (
		mu  sync.Mutex
		ops = map[string]int{}
	)
	s, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{
		Connection: secret.String(az.ConnectionString()),
		Container:  az.ContainerName(t),
		OnRequest:  func(op string) { mu.Lock(); ops[op]++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		c := ops
		ops = map[string]int{}
		return c
	}
	if c := count(); c["container"] != 1 {
		t.Fatalf("NewBlobStore sent %v, want one container request", c)
	}
	o := azeventhubs.Ownership{FullyQualifiedNamespace: "ns", EventHubName: "hub", ConsumerGroup: "cg", PartitionID: "0", OwnerID: "a"}
	won, err := s.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, nil)
	if err != nil || len(won) != 1 {
		t.Fatalf("claim: %v, %v", won, err)
	}
	if _, err := s.ClaimOwnership(ctx, won, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListOwnership(ctx, "ns", "hub", "cg", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := checkpoint.ReadLease(ctx, s, "ns", "hub", "cg", "0"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"upload": 1, "set_metadata": 1, "list": 1, "get": 1}
	c := count()
	for op, n := range want {
		if c[op] != n {
			t.Errorf("%s: %d requests, want %d (all: %v)", op, c[op], n, c)
		}
	}
}
