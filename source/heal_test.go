package source_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// newConsumerClient returns a client that does not retry.
func newConsumerClient(t *testing.T, conn string) *azeventhubs.ConsumerClient {
	t.Helper()
	c, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup,
		&azeventhubs.ConsumerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// readToEnd is a recorder that knows each partition's last sequence number
// and signals when every partition was read up to it.
type readToEnd struct {
	*recorder
	last map[string]int64
	done chan struct{}
	once sync.Once
}

func newReadToEnd(t *testing.T, ctx context.Context, conn string, from int64) *readToEnd {
	t.Helper()
	c := newConsumerClient(t, conn)
	props, err := c.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &readToEnd{recorder: newRecorder(0), last: map[string]int64{}, done: make(chan struct{})}
	for _, id := range props.PartitionIDs {
		pp, err := c.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if pp.LastEnqueuedSequenceNumber <= from {
			t.Fatalf("partition %s holds events up to %d only; send more", id, pp.LastEnqueuedSequenceNumber)
		}
		r.last[id] = pp.LastEnqueuedSequenceNumber
	}
	r.afterAdd = func(*source.Partition, []sinks.Event) {
		if r.missing() == "" {
			r.once.Do(func() { close(r.done) })
		}
	}
	return r
}

// missing says which partitions are not read to their end yet ("" when all are).
func (r *readToEnd) missing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, last := range r.last {
		evs := r.byPart[id]
		if len(evs) == 0 || evs[len(evs)-1].SequenceNumber < last {
			got := int64(-1)
			if len(evs) > 0 {
				got = evs[len(evs)-1].SequenceNumber
			}
			out = append(out, fmt.Sprintf("partition %s at %d of %d", id, got, last))
		}
	}
	slices.Sort(out)
	return fmt.Sprint(out)[1 : len(fmt.Sprint(out))-1]
}

// TestClaimSurvivesPartitionPropertiesFailures injects, through the
// emulator, failures of the partition-properties call the source makes to
// check each resume position while it claims the partitions: twelve calls
// in a row, so that partitions fail their attempts of the first claim.
// Every partition must still be read to its end, from its resume position
// on. (The SDK's processor
// registers a claimed partition before it asks for checkpoints and never
// forgets it when that fails; a store that returned the error left every
// partition of the claim owned and unread.) The watchdog would heal that
// after the ownership expiration, and the partitions would still be read
// to their end: so the test also fails on any heal, which is what tells a
// store that never fails the claim from one whose failure was healed.
func TestClaimSurvivesPartitionPropertiesFailures(t *testing.T) {
	ctx := testContext(t)
	srv, conn := ordersWithDemo(t, ctx, 4, produce.DemoOptions{Count: 400, Keys: 20, Seed: 5})
	const resumeAfter = 9
	rec := newReadToEnd(t, ctx, conn, resumeAfter)
	// A sink watermark for every partition makes the claim check each
	// resume position against the partition's properties.
	wm := func(context.Context, string) (*sinks.Position, error) {
		return &sinks.Position{SequenceNumber: resumeAfter}, nil
	}
	var (
		healMu sync.Mutex
		heals  []string
	)
	opts := source.WithoutClientRetries(source.Options{Connection: secretOf(conn), Store: fileStore(t), Watermark: wm, OnHeal: func(reason string) {
		healMu.Lock()
		heals = append(heals, reason)
		healMu.Unlock()
	}, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	src := newSource(t, ctx, opts)
	srv.FailPartitionProperties(12)
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.done, r, "every partition read to its end", rec.missing)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	healMu.Lock()
	if len(heals) > 0 {
		t.Errorf("the watchdog healed %v: a failed lookup left partitions owned and unread (the claim failed as a whole?)", heals)
	}
	healMu.Unlock()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for id, evs := range rec.byPart {
		if evs[0].SequenceNumber != resumeAfter+1 {
			t.Errorf("partition %s started at seq %d, want %d (after the watermark)", id, evs[0].SequenceNumber, resumeAfter+1)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].SequenceNumber != evs[i-1].SequenceNumber+1 {
				t.Errorf("partition %s: seq %d after %d", id, evs[i].SequenceNumber, evs[i-1].SequenceNumber)
				break
			}
		}
	}
	// with a failure left, this call would use it and fail
	if _, err := newConsumerClient(t, conn).GetPartitionProperties(ctx, "0", nil); err != nil {
		t.Errorf("the injected failures were not all used, so the test proves nothing: %v", err)
	}
}

// TestWatchdogHealsUnreadPartitions lets a failed checkpoint listing reach
// the SDK's processor, which then keeps every partition of the claim
// registered, and its lease renewed, without a reader. The watchdog must
// notice within the ownership expiration, count one heal and restart the
// processor, and every partition must be read to its end.
func TestWatchdogHealsUnreadPartitions(t *testing.T) {
	ctx := testContext(t)
	_, conn := ordersWithDemo(t, ctx, 4, produce.DemoOptions{Count: 200, Keys: 20, Seed: 6})
	rec := newReadToEnd(t, ctx, conn, 0)
	var mu sync.Mutex
	heals := map[string]int{}
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), OnHeal: func(reason string) {
		mu.Lock()
		heals[reason]++
		mu.Unlock()
	}, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	source.InjectListCheckpointsErrors(src, 4, true) // every retry of the first listing
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.done, r, "every partition read to its end", rec.missing)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if heals[source.HealUnread] == 0 {
		t.Errorf("heals %v: want the unread partitions healed", heals)
	}
	checkOncePerKeyInOrder(t, rec.events, 200)
}

// TestWatchdogReopensSilentPartition: the first handler of partition 0
// stops receiving (as a call that never returns would) and never sends a
// heartbeat. The watchdog must cancel it after the ownership expiration
// plus max_wait and count a heal; the partition is claimed again and read
// to its end.
func TestWatchdogReopensSilentPartition(t *testing.T) {
	ctx := testContext(t)
	_, conn := ordersWithDemo(t, ctx, 2, produce.DemoOptions{Count: 100, Keys: 10, Seed: 9})
	rec := newReadToEnd(t, ctx, conn, 0)
	var mu sync.Mutex
	heals := map[string]int{}
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), OnHeal: func(reason string) {
		mu.Lock()
		heals[reason]++
		mu.Unlock()
	}, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	var stuck sync.Once
	handle := func(ctx context.Context, p *source.Partition) error {
		hung := false
		if p.ID() == "0" {
			stuck.Do(func() { hung = true })
		}
		if hung {
			<-ctx.Done() // neither receives nor heartbeats until cancelled
			return nil
		}
		return rec.handle(ctx, p)
	}
	r := run(t, ctx, src, handle)
	waitFor(t, ctx, rec.done, r, "every partition read to its end", rec.missing)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if heals[source.HealSilent] != 1 {
		t.Errorf("heals %v: want one silent partition healed", heals)
	}
	checkOncePerKeyInOrder(t, rec.events, 100)
}

// releaseRecorder records the leases given up outside the processor's own
// way out (which releases every lease at once).
type releaseRecorder struct {
	azeventhubs.CheckpointStore
	mu       sync.Mutex
	released []string
}

func (r *releaseRecorder) ClaimOwnership(ctx context.Context, owns []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if len(owns) == 1 && owns[0].OwnerID == "" {
		r.mu.Lock()
		r.released = append(r.released, owns[0].PartitionID)
		r.mu.Unlock()
	}
	return r.CheckpointStore.ClaimOwnership(ctx, owns, opts)
}

// TestHandlerGivesPartitionUp: a handler that returns ErrGiveUp (its sink
// has been unavailable for long) ends the partition and frees its lease;
// the partition is claimed again and read to its end.
func TestHandlerGivesPartitionUp(t *testing.T) {
	ctx := testContext(t)
	_, conn := ordersWithDemo(t, ctx, 2, produce.DemoOptions{Count: 100, Keys: 10, Seed: 10})
	rec := newReadToEnd(t, ctx, conn, 0)
	store := &releaseRecorder{CheckpointStore: fileStore(t)}
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	var once sync.Once
	handle := func(ctx context.Context, p *source.Partition) error {
		first := false
		if p.ID() == "1" {
			once.Do(func() { first = true })
		}
		if first {
			return fmt.Errorf("sink down for too long: %w", source.ErrGiveUp)
		}
		return rec.handle(ctx, p)
	}
	r := run(t, ctx, src, handle)
	waitFor(t, ctx, rec.done, r, "every partition read to its end", rec.missing)
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	if !slices.Contains(store.released, "1") {
		t.Errorf("leases given up: %v, want partition 1's", store.released)
	}
	checkOncePerKeyInOrder(t, rec.events, 100)
}

// TestPartitionPropertiesAfterConnectionLoss: the properties connection
// survives a failed call and a dropped connection; the next calls answer.
// (Resume positions and lag are read through it; a properties path stuck
// on a dead link leaves claimed partitions unstarted.)
func TestPartitionPropertiesAfterConnectionLoss(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn := srv.ConnectionString("orders")
	src := newSource(t, ctx, source.WithoutClientRetries(source.Options{Connection: secretOf(conn), Store: fileStore(t)}))
	if _, err := src.PartitionProperties(ctx, "0"); err != nil {
		t.Fatalf("first call: %v", err)
	}
	srv.FailPartitionProperties(1)
	if _, err := src.PartitionProperties(ctx, "0"); err == nil {
		t.Fatal("the injected failure was not seen")
	}
	if _, err := src.PartitionProperties(ctx, "1"); err != nil {
		t.Fatalf("call after a failed one: %v", err)
	}
	srv.DropConnections()
	var err error
	for range 10 { // a call may still meet the dropped socket; the one after it must not
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = src.PartitionProperties(cctx, "1")
		cancel()
		if err == nil {
			break
		}
		t.Logf("after the drop: %v", err)
	}
	if err != nil {
		t.Fatalf("no answer after the connection was dropped: %v", err)
	}
}

// ordersWithDemo starts an emulator with an "orders" hub of the given
// partitions and sends it demo orders.
func ordersWithDemo(t *testing.T, ctx context.Context, partitions int, demo produce.DemoOptions) (*emulator.Server, string) {
	t.Helper()
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}})
	conn := srv.ConnectionString("orders")
	if n, err := produce.Demo(ctx, newProducer(t, conn), demo); err != nil || n != demo.Count {
		t.Fatalf("Demo sent %d of %d: %v", n, demo.Count, err)
	}
	return srv, conn
}

// TestWatchdogWaitsForSlowClaims: every CBS reply of the emulator is
// delayed, so the processor takes longer than the ownership expiration to
// open the links of a claim of 4 partitions (one token per link, answered
// one after the other). The partitions are slow, not stuck: the watchdog
// must not restart the processor (which cancels the handlers already
// running, and replays what they had received but not checkpointed), and
// every partition is read once, in order.
func TestWatchdogWaitsForSlowClaims(t *testing.T) {
	ctx := testContext(t)
	srv, conn := ordersWithDemo(t, ctx, 4, produce.DemoOptions{Count: 400, Keys: 20, Seed: 11})
	rec := newReadToEnd(t, ctx, conn, 0)
	healed := make(chan string, 1)
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), OnHeal: func(reason string) {
		select {
		case healed <- reason:
		default:
		}
	}, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	// 4 links at 1.5s each: past the 3s ownership expiration of the test
	// sources, below twice the expiration
	srv.SetLatency(1500 * time.Millisecond)
	r := run(t, ctx, src, rec.handle)
	select {
	case reason := <-healed:
		t.Fatalf("healed (%s) while the claim was still being opened; %s", reason, rec.missing())
	case <-rec.done:
	case <-r.done:
		t.Fatalf("Run returned %v", r.err)
	case <-ctx.Done():
		t.Fatalf("not every partition read to its end: %s", rec.missing())
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for id, evs := range rec.byPart {
		for i, e := range evs {
			if e.SequenceNumber != int64(i) {
				t.Fatalf("partition %s event %d: seq %d, want %d", id, i, e.SequenceNumber, i)
			}
		}
	}
	checkOncePerKeyInOrder(t, rec.events, 400)
}

// TestReceiveFailureReopensThePartition: once every partition is read to
// its end, the emulator drops every connection and more events are sent;
// the SDK does not retry (WithoutClientRetries), so the next receives fail
// with the lost connection. That must not stop Run: each failed partition
// ends and the processor opens it again on a new connection, and every
// partition is read to its new end, each event once (a connector that
// failed on the first lost connection stopped reading for good).
func TestReceiveFailureReopensThePartition(t *testing.T) {
	ctx := testContext(t)
	srv, conn := ordersWithDemo(t, ctx, 2, produce.DemoOptions{Count: 100, Keys: 20, Seed: 12})
	rec := newReadToEnd(t, ctx, conn, 0)
	src := newSource(t, ctx, source.WithoutClientRetries(source.Options{Connection: secretOf(conn), Store: fileStore(t),
		Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}}))
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.done, r, "every partition read to its end", rec.missing)

	srv.DropConnections()
	if n, err := produce.Demo(ctx, newProducer(t, conn), produce.DemoOptions{Count: 100, Keys: 20, Seed: 13}); err != nil || n != 100 {
		t.Fatalf("Demo sent %d of 100: %v", n, err)
	}
	c := newConsumerClient(t, conn)
	for id := range rec.last {
		pp, err := c.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		rec.mu.Lock()
		rec.last[id] = pp.LastEnqueuedSequenceNumber
		rec.mu.Unlock()
	}
	for rec.missing() != "" {
		select {
		case <-r.done:
			t.Fatalf("Run returned %v after the connections were dropped (%s)", r.err, rec.missing())
		case <-ctx.Done():
			t.Fatalf("not read to the end after the connections were dropped: %s", rec.missing())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.claims["0"] < 2 && rec.claims["1"] < 2 {
		t.Errorf("handlers started per partition: %v; want a partition started again after its receive failed", rec.claims)
	}
	for id, evs := range rec.byPart {
		for i, e := range evs {
			if e.SequenceNumber != int64(i) {
				t.Fatalf("partition %s: event %d has sequence number %d: a gap or a duplicate", id, i, e.SequenceNumber)
			}
		}
	}
}
