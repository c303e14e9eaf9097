package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	os.Exit(code)
}

// testTimeout bounds each test's waits; a wait that reaches it is a failure
// (the thing waited for never happened), not a timing assertion.
const testTimeout = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("EHSINK_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

// startEmulator runs an in-process emulator with the given hubs.
func startEmulator(t *testing.T, cfg emulator.Config) *emulator.Server {
	t.Helper()
	srv, err := emulator.Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("start emulator: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv
}

func newProducer(t *testing.T, conn string) *azeventhubs.ProducerClient {
	t.Helper()
	p, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

func fileStore(t *testing.T) azeventhubs.CheckpointStore {
	t.Helper()
	s, err := checkpoint.NewFileStore(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// recorder is the minimal partition loop of the tests: it records every
// event and checkpoints after each batch, like the runner does after a flush.
type recorder struct {
	mu       sync.Mutex
	events   []sinks.Event
	byPart   map[string][]sinks.Event
	lost     map[string]int // ownership losses seen per partition
	claims   map[string]int
	want     int
	done     int // events handled whole (checkpointed, unless noCkpt)
	reached  chan struct{}
	once     sync.Once
	noCkpt   bool
	afterAdd func(p *source.Partition, batch []sinks.Event)
	claimed  chan struct{} // closed at the first claim
	claim1   sync.Once
	onClaim  func(id string)
	// afterCommit runs after the batch was checkpointed.
	afterCommit func(p *source.Partition, batch []sinks.Event)
}

func newRecorder(want int) *recorder {
	return &recorder{byPart: map[string][]sinks.Event{}, lost: map[string]int{}, claims: map[string]int{}, want: want, reached: make(chan struct{}), claimed: make(chan struct{})}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func (r *recorder) handle(ctx context.Context, p *source.Partition) error {
	r.mu.Lock()
	r.claims[p.ID()]++
	r.mu.Unlock()
	r.claim1.Do(func() { close(r.claimed) })
	if r.onClaim != nil {
		r.onClaim(p.ID())
	}
	for {
		batch, err := p.Receive(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, source.ErrOwnershipLost) {
			r.mu.Lock()
			r.lost[p.ID()]++
			r.mu.Unlock()
			return err
		}
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			continue
		}
		for i := range batch {
			batch[i].Body = append([]byte(nil), batch[i].Body...)
		}
		r.mu.Lock()
		r.events = append(r.events, batch...)
		r.byPart[p.ID()] = append(r.byPart[p.ID()], batch...)
		r.mu.Unlock()
		if r.afterAdd != nil {
			r.afterAdd(p, batch)
		}
		if !r.noCkpt {
			if err := p.Checkpoint(ctx, batch[len(batch)-1].Position()); err != nil {
				if errors.Is(err, source.ErrOwnershipLost) {
					r.mu.Lock()
					r.lost[p.ID()]++
					r.mu.Unlock()
				}
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		if r.afterCommit != nil {
			r.afterCommit(p, batch)
		}
		// Counted once checkpointed: a test that stops at want finds
		// every batch's checkpoint stored, not one still in flight on
		// another partition.
		r.mu.Lock()
		r.done += len(batch)
		n := r.done
		r.mu.Unlock()
		if r.want > 0 && n >= r.want {
			r.once.Do(func() { close(r.reached) })
		}
	}
}

// running is a Run call in the background.
type running struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, set before done is closed
}

// stop cancels Run and returns its result.
func (r *running) stop() error {
	r.cancel()
	<-r.done
	return r.err
}

// run starts src.Run in the background; it is stopped when t ends.
func run(t *testing.T, ctx context.Context, src *source.Source, handle func(context.Context, *source.Partition) error) *running {
	t.Helper()
	rctx, cancel := context.WithCancel(ctx)
	r := &running{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = src.Run(rctx, handle)
	}()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

func newSource(t *testing.T, ctx context.Context, opts source.Options) *source.Source {
	t.Helper()
	if opts.LoadBalancing.UpdateInterval == 0 {
		opts.LoadBalancing.UpdateInterval = 500 * time.Millisecond
		opts.LoadBalancing.OwnershipExpiration = 3 * time.Second
	}
	if opts.Batch.MaxWait == 0 {
		opts.Batch.MaxWait = 200 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	src, err := source.New(ctx, opts)
	if err != nil {
		t.Fatalf("source.New: %v", err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src
}

func waitFor(t *testing.T, ctx context.Context, ch <-chan struct{}, r *running, what string, progress func() string) {
	t.Helper()
	select {
	case <-ch:
	case <-r.done:
		t.Fatalf("Run returned %v while waiting for %s (%s)", r.err, what, progress())
	case <-ctx.Done():
		t.Fatalf("gave up waiting for %s: %s", what, progress())
	}
}

// checkOncePerKeyInOrder checks that events holds every demo order exactly
// once and each customer's orders in the order they were sent.
func checkOncePerKeyInOrder(t *testing.T, events []sinks.Event, want int) {
	t.Helper()
	seen := map[string]bool{}
	lastSeq := map[string]int{}
	for _, e := range events {
		var o produce.Order
		if err := json.Unmarshal(e.Body, &o); err != nil {
			t.Fatalf("%s: body %q: %v", e.String(), e.Body, err)
		}
		if seen[o.OrderID] {
			t.Errorf("order %s delivered twice (%s)", o.OrderID, e.String())
		}
		seen[o.OrderID] = true
		if e.PartitionKey == nil || *e.PartitionKey != o.Customer.ID {
			t.Errorf("%s: partition key %v, want %s", e.String(), e.PartitionKey, o.Customer.ID)
		}
		if o.Seq != lastSeq[o.Customer.ID]+1 {
			t.Errorf("customer %s: order seq %d after %d", o.Customer.ID, o.Seq, lastSeq[o.Customer.ID])
		}
		lastSeq[o.Customer.ID] = o.Seq
	}
	if len(seen) != want {
		t.Errorf("%d distinct orders delivered, want %d", len(seen), want)
	}
}

// storedCheckpoints returns the store's checkpoints by partition.
func storedCheckpoints(t *testing.T, ctx context.Context, store azeventhubs.CheckpointStore, srv *emulator.Server, hub string) map[string]int64 {
	t.Helper()
	props, err := azeventhubs.ParseConnectionString(srv.ConnectionString(hub))
	if err != nil {
		t.Fatal(err)
	}
	cps, err := store.ListCheckpoints(ctx, props.FullyQualifiedNamespace, hub, azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, cp := range cps {
		if cp.SequenceNumber == nil {
			t.Fatalf("checkpoint of partition %s has no sequence number", cp.PartitionID)
		}
		out[cp.PartitionID] = *cp.SequenceNumber
	}
	return out
}

// TestDeliversEveryEventOnceInOrderAndResumes sends 10,000 demo orders with
// 50 partition keys over 4 partitions, reads them through the source with a
// checkpoint after each batch, then restarts the source and sends more: the
// restart starts right after the checkpoints and re-delivers nothing.
func TestDeliversEveryEventOnceInOrderAndResumes(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		deliversOnceAndResumes(t, func(t *testing.T) azeventhubs.CheckpointStore { return fileStore(t) }, nil)
	})
	t.Run("blob", func(t *testing.T) {
		az := testenv.Azurite(t)
		ctr := az.ContainerName(t)
		var bs *checkpoint.BlobStore
		deliversOnceAndResumes(t, func(t *testing.T) azeventhubs.CheckpointStore {
			var err error
			bs, err = checkpoint.NewBlobStore(t.Context(), checkpoint.BlobOptions{Connection: secretOf(az.ConnectionString()), Container: ctr})
			if err != nil {
				t.Fatal(err)
			}
			return checkpoint.Lowercase(bs, nil)
		}, func(t *testing.T, ns string, want map[string]int64) { checkBlobLayout(t, bs, ns, want) })
	})
}

// checkBlobLayout checks the checkpoint blobs: the lowercase names every
// Azure SDK uses, the sequencenumber and offset metadata, and that the SDK's
// own checkpoints.BlobStore reads them back as the positions written.
func checkBlobLayout(t *testing.T, bs *checkpoint.BlobStore, ns string, want map[string]int64) {
	t.Helper()
	ctx := testContext(t)
	prefix := strings.ToLower(ns) + "/orders/$default/checkpoint/"
	// the copy the store writes for the JavaScript SDK, which names an
	// emulator endpoint's namespace without its port
	host := ns
	if h, _, err := net.SplitHostPort(ns); err == nil {
		host = h
	}
	jsPrefix := strings.ToLower(host) + "/orders/$default/checkpoint/"
	pager := bs.Container().NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Include: container.ListBlobsInclude{Metadata: true}})
	found := map[string]bool{}
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			name := *b.Name
			id, ok := strings.CutPrefix(name, prefix)
			if !ok {
				if strings.Contains(name, "/checkpoint/") && !strings.HasPrefix(name, jsPrefix) {
					t.Errorf("checkpoint blob %q is not under %q", name, prefix)
				}
				continue
			}
			found[id] = true
			md := map[string]string{}
			for k, v := range b.Metadata {
				md[strings.ToLower(k)] = *v
			}
			if md["sequencenumber"] != strconv.FormatInt(want[id], 10) || md["offset"] == "" {
				t.Errorf("blob %s metadata %v, want sequencenumber %d and an offset", name, md, want[id])
			}
		}
	}
	if len(found) != len(want) {
		t.Errorf("checkpoint blobs for partitions %v, want %d", found, len(want))
	}
	sdk, err := checkpoints.NewBlobStore(bs.Container(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := sdk.ListCheckpoints(ctx, strings.ToLower(ns), "orders", "$default", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range cps {
		if cp.SequenceNumber == nil || *cp.SequenceNumber != want[cp.PartitionID] || cp.Offset == nil {
			t.Errorf("SDK BlobStore reads partition %s as seq %v offset %v, want seq %d", cp.PartitionID, cp.SequenceNumber, cp.Offset, want[cp.PartitionID])
		}
	}
	if len(cps) != len(want) {
		t.Errorf("SDK BlobStore lists %d checkpoints, want %d", len(cps), len(want))
	}
}

func deliversOnceAndResumes(t *testing.T, newStore func(*testing.T) azeventhubs.CheckpointStore, checkStore func(t *testing.T, ns string, want map[string]int64)) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	conn := srv.ConnectionString("orders")
	producer := newProducer(t, conn)
	const total = 10000
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: total, Keys: 50, Seed: 7}); err != nil || n != total {
		t.Fatalf("Demo sent %d, %v; want %d", n, err, total)
	}
	store := newStore(t)

	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{Batch: source.Batch{MaxEvents: 300}, LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	rec := newRecorder(total)
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.reached, r, "10,000 events", func() string { return fmt.Sprintf("%d received", rec.count()) })
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rec.byPart) != 4 {
		t.Errorf("events came from %d partitions, want 4", len(rec.byPart))
	}
	for id, evs := range rec.byPart {
		for i, e := range evs {
			if e.SequenceNumber != int64(i) || e.Partition != id {
				t.Fatalf("partition %s event %d: %s, want seq %d", id, i, e.String(), i)
			}
		}
	}
	checkOncePerKeyInOrder(t, rec.events, total)
	cps := storedCheckpoints(t, ctx, store, srv, "orders")
	for id, evs := range rec.byPart {
		if cps[id] != evs[len(evs)-1].SequenceNumber {
			t.Errorf("partition %s: checkpoint %d, last event %d", id, cps[id], evs[len(evs)-1].SequenceNumber)
		}
	}
	if checkStore != nil {
		props, _ := azeventhubs.ParseConnectionString(conn)
		checkStore(t, props.FullyQualifiedNamespace, cps)
	}
	if err := src.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Restart: a new source on the same store gets only what is new.
	const more = 400
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: more, Keys: 50, Seed: 8}); err != nil || n != more {
		t.Fatalf("Demo sent %d, %v", n, err)
	}
	src2 := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	rec2 := newRecorder(more)
	r2 := run(t, ctx, src2, rec2.handle)
	waitFor(t, ctx, rec2.reached, r2, "the events sent after the restart", func() string { return fmt.Sprintf("%d received", rec2.count()) })
	if err := r2.stop(); err != nil {
		t.Fatalf("Run after restart: %v", err)
	}
	if got := rec2.count(); got != more {
		t.Errorf("after restart %d events delivered, want %d", got, more)
	}
	for id, evs := range rec2.byPart {
		if first := evs[0].SequenceNumber; first != cps[id]+1 {
			t.Errorf("partition %s resumed at seq %d, want %d (checkpoint %d)", id, first, cps[id]+1, cps[id])
		}
	}
	checkOncePerKeyInOrder(t, rec2.events, more)
}

// flakyStore fails every other ownership claim and checkpoint listing, six
// times in all (the processor's first rounds), as a throttled or briefly
// unreachable storage account does.
type flakyStore struct {
	azeventhubs.CheckpointStore
	mu    sync.Mutex
	calls int
	fails int
}

func (f *flakyStore) fail() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls%2 == 1 && f.fails < 6 {
		f.fails++
		return true
	}
	return false
}

func (f *flakyStore) ClaimOwnership(ctx context.Context, o []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if f.fail() {
		return nil, errors.New("503 server busy")
	}
	return f.CheckpointStore.ClaimOwnership(ctx, o, opts)
}

func (f *flakyStore) ListCheckpoints(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	if f.fail() {
		return nil, errors.New("503 server busy")
	}
	return f.CheckpointStore.ListCheckpoints(ctx, ns, hub, cg, opts)
}

// TestStoreBlipsDoNotStopTheSource: the processor stops at the first store
// error it sees (giving every lease up on its way out); the source retries
// the store's calls, so a flaky store still delivers every event once.
func TestStoreBlipsDoNotStopTheSource(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	conn := srv.ConnectionString("orders")
	const total = 400
	if n, err := produce.Demo(ctx, newProducer(t, conn), produce.DemoOptions{Count: total, Keys: 20, Seed: 3}); err != nil || n != total {
		t.Fatalf("Demo sent %d, %v; want %d", n, err, total)
	}
	flaky := &flakyStore{CheckpointStore: fileStore(t)}
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: flaky, Settings: source.Settings{LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	rec := newRecorder(total)
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.reached, r, "every event", func() string { return fmt.Sprintf("%d received", rec.count()) })
	if err := r.stop(); err != nil {
		t.Fatalf("Run with a flaky store: %v", err)
	}
	checkOncePerKeyInOrder(t, rec.events, total)
	flaky.mu.Lock()
	defer flaky.mu.Unlock()
	if flaky.fails == 0 {
		t.Fatal("the store never failed; the test proves nothing")
	}
}
