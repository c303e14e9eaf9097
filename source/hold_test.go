package source_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/source"
)

// roundCounter counts the ownership listings (one per load-balancing
// round of the processor) and signals the second.
type roundCounter struct {
	azeventhubs.CheckpointStore
	n      atomic.Int32
	second chan struct{}
	once   sync.Once
}

func (c *roundCounter) ListOwnership(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if c.n.Add(1) == 2 {
		c.once.Do(func() { close(c.second) })
	}
	return c.CheckpointStore.ListOwnership(ctx, ns, hub, cg, opts)
}

// TestHoldClaimsLeavesPartitionsToOthers: replica A, whose sink is down
// (HoldClaims true), starts first with a greedy strategy and runs two
// load-balancing rounds over free partitions; it must claim none of them.
// Replica B, started after, claims them all and reads them to their end.
// Without the hold A takes every partition at its first round and its
// handler runs.
func TestHoldClaimsLeavesPartitionsToOthers(t *testing.T) {
	ctx := testContext(t)
	_, conn := ordersWithDemo(t, ctx, 2, produce.DemoOptions{Count: 100, Keys: 10, Seed: 12})
	store := fileStore(t)
	rounds := &roundCounter{CheckpointStore: store, second: make(chan struct{})}
	var aClaims atomic.Int32
	a := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: rounds, InstanceID: "a", HoldClaims: func() bool { return true }, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	ra := run(t, ctx, a, func(ctx context.Context, p *source.Partition) error {
		aClaims.Add(1)
		<-ctx.Done()
		return nil
	})
	waitFor(t, ctx, rounds.second, ra, "two claim rounds of replica A", func() string { return "" })
	if n := aClaims.Load(); n != 0 {
		t.Fatalf("replica A, holding its claims, started %d partitions", n)
	}

	rec := newReadToEnd(t, ctx, conn, 0)
	b := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, InstanceID: "b", Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	rb := run(t, ctx, b, rec.handle)
	waitFor(t, ctx, rec.done, rb, "replica B reading every partition to its end", rec.missing)
	if err := rb.stop(); err != nil {
		t.Fatalf("B: Run: %v", err)
	}
	if err := ra.stop(); err != nil {
		t.Fatalf("A: Run: %v", err)
	}
	if n := aClaims.Load(); n != 0 {
		t.Errorf("replica A, holding its claims, started %d partitions", n)
	}
}

// TestLeaseExpiryFollowsRenewals: a running partition's lease expiry is
// the ownership expiration after a renewal, and it moves forward with the
// processor's renewals (one per update interval).
func TestLeaseExpiryFollowsRenewals(t *testing.T) {
	ctx := testContext(t)
	_, conn := ordersWithDemo(t, ctx, 1, produce.DemoOptions{Count: 10, Keys: 5, Seed: 13})
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	moved := make(chan struct{})
	r := run(t, ctx, src, func(ctx context.Context, p *source.Partition) error {
		start := time.Now()
		first, ok := p.LeaseExpiry()
		if !ok {
			t.Error("no lease expiry recorded for a claimed partition")
			return nil
		}
		// 3s expiration in the test sources: the lease runs out after now,
		// and no later than the expiration from now.
		if !first.After(start) || first.After(start.Add(3*time.Second)) {
			t.Errorf("lease expiry %s, want within the 3s expiration after %s", first, start)
		}
		for {
			if _, err := p.Receive(ctx); ctx.Err() != nil {
				return nil
			} else if err != nil {
				return err
			}
			if at, _ := p.LeaseExpiry(); at.After(first) {
				close(moved)
				<-ctx.Done()
				return nil
			}
		}
	})
	waitFor(t, ctx, moved, r, "a renewal moving the lease expiry", func() string { return "" })
}
