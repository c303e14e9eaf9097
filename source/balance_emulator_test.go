package source_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/source"
)

// TestBalancedClaimsInOneRound runs the balanced strategy through the SDK's
// processor against the emulator, with an update interval far longer than
// the test, so that every replica runs only the round it makes at its
// start: a lone replica owns all 16 partitions after it (the SDK's own
// balanced strategy claimed one), and a second replica takes its 8 from
// the first in its own first round, which loses exactly those.
func TestBalancedClaimsInOneRound(t *testing.T) {
	ctx := testContext(t)
	const partitions = 16
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}})
	conn := srv.ConnectionString("orders")
	store := fileStore(t)
	settings := source.Settings{
		Batch:         source.Batch{MaxWait: 100 * time.Millisecond},
		LoadBalancing: source.LoadBalancing{Strategy: "balanced", UpdateInterval: 10 * time.Minute, OwnershipExpiration: 30 * time.Minute},
	}

	type owned struct {
		mu   sync.Mutex
		now  map[string]bool
		want int
		hit  chan struct{}
		once sync.Once
	}
	track := func(want int) *owned { return &owned{now: map[string]bool{}, want: want, hit: make(chan struct{})} }
	handler := func(o *owned) func(context.Context, *source.Partition) error {
		return func(ctx context.Context, p *source.Partition) error {
			o.mu.Lock()
			o.now[p.ID()] = true
			if len(o.now) == o.want {
				o.once.Do(func() { close(o.hit) })
			}
			o.mu.Unlock()
			defer func() { o.mu.Lock(); delete(o.now, p.ID()); o.mu.Unlock() }()
			for {
				if _, err := p.Receive(ctx); err != nil || ctx.Err() != nil {
					return err
				}
			}
		}
	}
	count := func(o *owned) func() string {
		return func() string { o.mu.Lock(); defer o.mu.Unlock(); return fmt.Sprintf("%d partitions owned", len(o.now)) }
	}

	a := track(partitions)
	srcA := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, InstanceID: "replica-a", Settings: settings})
	runA := run(t, ctx, srcA, handler(a))
	waitFor(t, ctx, a.hit, runA, "A to own every partition in its first round", count(a))

	b := track(partitions / 2)
	srcB := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, InstanceID: "replica-b", Settings: settings})
	runB := run(t, ctx, srcB, handler(b))
	waitFor(t, ctx, b.hit, runB, "B to take half in its first round", count(b))

	// A learns of each loss when its link is taken over.
	deadline := time.Now().Add(20 * time.Second)
	for {
		a.mu.Lock()
		n := len(a.now)
		a.mu.Unlock()
		if n == partitions/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A still runs %d partitions after B took %d", n, partitions/2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.now) != partitions/2 {
		t.Fatalf("B owns %d partitions, want %d", len(b.now), partitions/2)
	}
}

// TestPartitionsAddedWhileRunning grows the hub under a running replica, as
// Event Hubs Premium and Dedicated allow: the new partitions are claimed at
// the next claim round and their events delivered (the SDK's processor
// reads the partitions once, at its start; the source reads them at every
// round).
func TestPartitionsAddedWhileRunning(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn := srv.ConnectionString("orders")
	settings := source.Settings{
		Batch:         source.Batch{MaxWait: 100 * time.Millisecond},
		LoadBalancing: source.LoadBalancing{Strategy: "balanced", UpdateInterval: time.Second, OwnershipExpiration: time.Minute},
	}
	rec := newRecorder(2)
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), InstanceID: "replica-a", Settings: settings})
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.claimed, r, "the first claim", func() string { return "no partition claimed" })
	if err := srv.AddPartitions("orders", 4); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, conn)
	for _, id := range []string{"2", "3"} {
		batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id})
		if err != nil {
			t.Fatal(err)
		}
		if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte("to " + id)}, nil); err != nil {
			t.Fatal(err)
		}
		if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, ctx, rec.reached, r, "the events of partitions 2 and 3", func() string {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return fmt.Sprintf("claims %v, events by partition: %d in 2, %d in 3", rec.claims, len(rec.byPart["2"]), len(rec.byPart["3"]))
	})
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.byPart["2"]) != 1 || len(rec.byPart["3"]) != 1 {
		t.Fatalf("events by partition after growing the hub: %d in 2, %d in 3, want 1 each", len(rec.byPart["2"]), len(rec.byPart["3"]))
	}
}
