package source

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// nopStore satisfies azeventhubs.CheckpointStore for option validation only.
type nopStore struct{}

func (nopStore) ClaimOwnership(context.Context, []azeventhubs.Ownership, *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return nil, nil
}
func (nopStore) ListCheckpoints(context.Context, string, string, string, *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	return nil, nil
}
func (nopStore) ListOwnership(context.Context, string, string, string, *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return nil, nil
}
func (nopStore) SetCheckpoint(context.Context, azeventhubs.Checkpoint, *azeventhubs.SetCheckpointOptions) error {
	return nil
}

// failingClaims fails every ClaimOwnership and counts the calls.
type failingClaims struct {
	nopStore
	calls int
}

func (f *failingClaims) ClaimOwnership(context.Context, []azeventhubs.Ownership, *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	f.calls++
	return nil, errors.New("store unreachable")
}

// TestReleaseOnStopNotRetried: the processor's release of its leases when
// it stops is tried once (a lease expires anyway, and a store that does not
// answer must not hold the stop), while claims are retried.
func TestReleaseOnStopNotRetried(t *testing.T) {
	store := &failingClaims{}
	r := &resumeStore{CheckpointStore: store, s: &Source{log: slog.New(slog.DiscardHandler)}}
	release := []azeventhubs.Ownership{{PartitionID: "0"}, {PartitionID: "1"}}
	if _, err := r.ClaimOwnership(context.Background(), release, nil); err == nil {
		t.Fatal("release through a failing store succeeded")
	}
	if store.calls != 1 {
		t.Fatalf("release tried %d times, want 1", store.calls)
	}
	store.calls = 0
	claim := []azeventhubs.Ownership{{PartitionID: "0", OwnerID: "me"}}
	if _, err := r.ClaimOwnership(context.Background(), claim, nil); err == nil {
		t.Fatal("claim through a failing store succeeded")
	}
	if store.calls != storeAttempts {
		t.Fatalf("claim tried %d times, want %d", store.calls, storeAttempts)
	}
}
