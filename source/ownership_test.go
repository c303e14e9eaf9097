package source_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// TestOwnershipLostMidBatch: replica A owns both partitions and holds a
// received batch of each when replica B starts and takes one. A's
// checkpoint of that batch is refused with ErrOwnershipLost (nothing is
// written for a partition A no longer owns), A's Run goes on with the other
// partition, and B reads the taken partition from its start, so every event
// is delivered.
func TestOwnershipLostMidBatch(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn := srv.ConnectionString("orders")
	const total = 400
	if n, err := produce.Demo(ctx, newProducer(t, conn), produce.DemoOptions{Count: total, Keys: 20, Seed: 3}); err != nil || n != total {
		t.Fatalf("Demo sent %d, %v", n, err)
	}
	store := fileStore(t)

	var (
		mu       sync.Mutex
		seen     = map[string]bool{} // partition/seq delivered to A or B
		all      = make(chan struct{})
		allOnce  sync.Once
		aClaimed = map[string]bool{}
		aBoth    = make(chan struct{})
	)
	note := func(batch []sinks.Event) {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range batch {
			seen[fmt.Sprintf("%s/%d", e.Partition, e.SequenceNumber)] = true
		}
		if len(seen) == total {
			allOnce.Do(func() { close(all) })
		}
	}

	recB := newRecorder(0)
	recB.afterCommit = func(_ *source.Partition, batch []sinks.Event) { note(batch) }

	recA := newRecorder(0)
	recA.onClaim = func(id string) {
		mu.Lock()
		defer mu.Unlock()
		aClaimed[id] = true
		if len(aClaimed) == 2 {
			close(aBoth)
		}
	}
	var firstBatch sync.Map
	recA.afterAdd = func(p *source.Partition, batch []sinks.Event) {
		note(batch)
		if _, loaded := firstBatch.LoadOrStore(p.ID(), true); !loaded {
			// hold the first batch of each partition, unflushed, until B owns one
			select {
			case <-recB.claimed:
			case <-ctx.Done():
			}
		}
	}

	srcA := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, InstanceID: "replica-a", Settings: source.Settings{Batch: source.Batch{MaxEvents: 50}, LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	runA := run(t, ctx, srcA, recA.handle)
	waitFor(t, ctx, aBoth, runA, "A to own both partitions", func() string { return fmt.Sprint(recA.claims) })

	srcB := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, InstanceID: "replica-b", Settings: source.Settings{Batch: source.Batch{MaxEvents: 50}}})
	runB := run(t, ctx, srcB, recB.handle)
	waitFor(t, ctx, all, runB, "every event", func() string { mu.Lock(); defer mu.Unlock(); return fmt.Sprintf("%d of %d", len(seen), total) })

	recA.mu.Lock()
	recB.mu.Lock()
	defer recA.mu.Unlock()
	defer recB.mu.Unlock()
	if len(recB.byPart) != 1 {
		t.Fatalf("B read partitions %v, want exactly one", keys(recB.byPart))
	}
	var taken string
	for id := range recB.byPart {
		taken = id
	}
	if recA.lost[taken] == 0 {
		t.Errorf("A never saw ErrOwnershipLost on partition %s", taken)
	}
	for id, n := range recA.lost {
		if id != taken && n > 0 {
			t.Errorf("A lost partition %s too", id)
		}
	}
	if first := recB.byPart[taken][0].SequenceNumber; first != 0 {
		t.Errorf("B started partition %s at seq %d, want 0: A checkpointed a batch after losing the partition", taken, first)
	}
	cps := storedCheckpoints(t, ctx, store, srv, "orders")
	if last := recB.byPart[taken][len(recB.byPart[taken])-1].SequenceNumber; cps[taken] != last {
		t.Errorf("checkpoint of partition %s is %d, want B's last %d", taken, cps[taken], last)
	}
	select {
	case <-runA.done:
		t.Fatalf("A's Run returned %v after losing one partition", runA.err)
	default:
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
