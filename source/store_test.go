package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
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

// failingClaims fails every ClaimOwnership and counts the leases it was
// asked to write.
type failingClaims struct {
	nopStore
	mu    sync.Mutex
	calls int
}

func (f *failingClaims) ClaimOwnership(_ context.Context, owns []azeventhubs.Ownership, _ *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls += len(owns)
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
	if store.calls != len(release) {
		t.Fatalf("release of %d leases wrote %d, want each tried once", len(release), store.calls)
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

// etagStore keeps leases as the Blob store does: a write whose etag is
// not the lease's current one is skipped without an error. landed, when
// set, is called after a write of owner "me" to partition "1" succeeded
// and before the call returns.
type etagStore struct {
	nopStore
	mu     sync.Mutex
	leases map[string]azeventhubs.Ownership
	n      int
	landed func()
}

func (e *etagStore) ClaimOwnership(_ context.Context, owns []azeventhubs.Ownership, _ *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	e.mu.Lock()
	var got []azeventhubs.Ownership
	renewedOne := false
	for _, o := range owns {
		cur, ok := e.leases[o.PartitionID]
		if ok && (o.ETag == nil || *o.ETag != *cur.ETag) {
			continue
		}
		e.n++
		tag := azcore.ETag(fmt.Sprint(e.n))
		o.ETag = &tag
		e.leases[o.PartitionID] = o
		got = append(got, o)
		renewedOne = renewedOne || (o.PartitionID == "1" && o.OwnerID == "me")
	}
	landed := e.landed
	e.mu.Unlock()
	if renewedOne && landed != nil {
		landed()
	}
	return got, nil
}

func (e *etagStore) ListOwnership(context.Context, string, string, string, *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var owns []azeventhubs.Ownership
	for _, o := range e.leases {
		owns = append(owns, o)
	}
	return owns, nil
}

func (e *etagStore) lease(id string) azeventhubs.Ownership {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leases[id]
}

// TestGiveUpWinsOverARenewalInFlight: the processor's renewal of a
// partition passes the source before a handler gives the partition up, and
// lands in the store first (its etag moves), answering only after the
// release was written. The release must still free the lease, and the
// renewal's answer must not make the lease this replica's again: its next
// rounds would renew it, and the partition would stay owned here, unread,
// while another replica could serve it (the chaos matrix saw it held 17 s,
// until the handler's end released it a second time).
func TestGiveUpWinsOverARenewalInFlight(t *testing.T) {
	tag := azcore.ETag("0")
	lease := azeventhubs.Ownership{PartitionID: "1", OwnerID: "me", ETag: &tag}
	store := &etagStore{leases: map[string]azeventhubs.Ownership{"1": lease}}
	s := &Source{owner: "me", log: slog.New(slog.DiscardHandler), opts: Options{Store: store,
		HoldClaims: func() bool { return true }, // the sink is down: no new claims
		Settings:   Settings{LoadBalancing: LoadBalancing{OwnershipExpiration: time.Hour}}}}
	s.noteClaims([]azeventhubs.Ownership{lease})
	r := &resumeStore{CheckpointStore: store, s: s}

	// The renewal is in flight: past the source, landed in the store; the
	// handler gives the partition up before its answer comes back.
	store.landed = func() {
		store.landed = nil
		s.giveUpLease(context.Background(), "1")
	}
	if _, err := r.ClaimOwnership(context.Background(), []azeventhubs.Ownership{lease}, nil); err != nil {
		t.Fatalf("renewal: %v", err)
	}
	if got := store.lease("1"); got.OwnerID != "" {
		t.Fatalf("after the give-up the lease is %q's, want free", got.OwnerID)
	}

	// The processor's next round still counts the partition as its own
	// (it listed it before the release) and renews it.
	again := lease
	tag2 := *store.lease("1").ETag
	again.ETag = &tag2
	if _, err := r.ClaimOwnership(context.Background(), []azeventhubs.Ownership{again}, nil); err != nil {
		t.Fatalf("next renewal: %v", err)
	}
	if got := store.lease("1"); got.OwnerID != "" {
		t.Errorf("a renewal after the give-up made the lease %q's again", got.OwnerID)
	}
	s.mu.Lock()
	_, claimed := s.claimed["1"]
	s.mu.Unlock()
	if claimed {
		t.Error("the given-up partition is recorded as claimed")
	}
}
