package connector

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// testFilter keeps the events of sinktest.Event whose customer is not c-3,
// drops 100..149 entirely (whole batches) and the tail from 290 on.
func testFilter() *FilterSpec {
	return &FilterSpec{
		Keep: expr.MustCompile(`$.customer != 'c-3' and $.seq < 290`),
		Drop: expr.MustCompile(`$.seq >= 100 and $.seq < 150`),
	}
}

func filterKeeps(seq int64) bool { return seq%7 != 3 && seq < 290 && (seq < 100 || seq >= 150) }

// batching makes a sink a Batcher that asks for a flush every few writes,
// as a Parquet writer gathering a file does: dropped events must wait for
// what it holds.
type batching struct{ *sinktest.Memory }

func (b batching) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := b.Memory.Open(ctx, p)
	return &batchingWriter{Writer: w}, wm, err
}

type batchingWriter struct {
	sinks.Writer
	writes int
}

func (w *batchingWriter) Write(ctx context.Context, events []sinks.Event) error {
	w.writes++
	return w.Writer.Write(ctx, events)
}

func (w *batchingWriter) FlushDue(time.Time) bool { return w.writes%5 == 0 }

func (w *batchingWriter) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	return w.Writer.(sinks.DeadLetterer).DeadLetter(ctx, letters)
}

// TestRunnerFilter: dropped events are neither written nor dead-lettered,
// the checkpoint reaches the last event even when it was dropped, and no
// checkpoint ever passes an event the sink has not committed.
func TestRunnerFilter(t *testing.T) {
	for _, batcher := range []bool{false, true} {
		t.Run(fmt.Sprintf("batcher=%v", batcher), func(t *testing.T) {
			mem := sinktest.NewMemory()
			var sink sinks.Sink = mem
			if batcher {
				sink = batching{mem}
			}
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			ctx, cancel := context.WithCancel(context.Background())
			p := newMemPartition("0", 300, store, rand.New(rand.NewPCG(41, 42)), cancel)
			var violations []string
			p.onCkpt = func(pos sinks.Position) {
				committed := mem.Committed("0")
				for s := int64(0); s <= pos.SequenceNumber; s++ {
					if filterKeeps(s) && !slices.Contains(committed, s) {
						violations = append(violations, fmt.Sprintf("checkpoint %d passes seq %d, not committed", pos.SequenceNumber, s))
						return
					}
				}
			}
			met, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			r, _ := NewRunner(RunnerOptions{Connector: "f", Sink: sink, Filter: testFilter(), Metrics: met})
			if err := r.RunPartition(ctx, p); err != nil {
				t.Fatal(err)
			}
			if len(violations) > 0 {
				t.Fatal(violations[0])
			}
			var want []int64
			for s := int64(0); s < 300; s++ {
				if filterKeeps(s) {
					want = append(want, s)
				}
			}
			if got := mem.Committed("0"); !slices.Equal(got, want) {
				t.Fatalf("committed %d events %v..., want %d", len(got), head(got), len(want))
			}
			if d := mem.DeadLetters("0"); len(d) != 0 {
				t.Fatalf("%d dead letters, want none", len(d))
			}
			if pos, _ := store.get("0"); pos.SequenceNumber != 299 || pos.Offset != sinktest.Event("0", 299).Offset {
				t.Fatalf("final checkpoint %+v, want seq 299 (dropped) with its offset", pos)
			}
			if got := testutil.ToFloat64(met.filtered.WithLabelValues("f", "0")); got != float64(300-len(want)) {
				t.Fatalf("ehsink_events_filtered_total = %v, want %d", got, 300-len(want))
			}
		})
	}
}

// TestRunnerFilterAllDropped: a partition whose every event is dropped
// still checkpoints its way forward, batch after batch.
func TestRunnerFilterAllDropped(t *testing.T) {
	mem := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 60, store, rand.New(rand.NewPCG(43, 44)), cancel)
	var ckpts []int64
	p.onCkpt = func(pos sinks.Position) { ckpts = append(ckpts, pos.SequenceNumber) }
	r, _ := NewRunner(RunnerOptions{Sink: mem, Filter: &FilterSpec{Drop: expr.MustCompile(`true`)}})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(mem.Committed("0")) != 0 || len(ckpts) < 5 || ckpts[len(ckpts)-1] != 59 {
		t.Fatalf("committed %v, checkpoints %v; want nothing committed and checkpoints up to 59", mem.Committed("0"), ckpts)
	}
}

// TestRunnerFilterInvalidJSON: an event the filter cannot read is a dead
// letter naming the filter, never dropped in silence.
func TestRunnerFilterInvalidJSON(t *testing.T) {
	mem := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 40, store, rand.New(rand.NewPCG(45, 46)), cancel)
	for i := range p.log {
		if i%10 == 4 {
			p.log[i].Body = []byte(`not json`)
		}
	}
	r, _ := NewRunner(RunnerOptions{Sink: mem, Filter: &FilterSpec{Keep: expr.MustCompile(`$.seq < 35`)}})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	dead := mem.DeadLetters("0")
	if len(dead) != 4 || dead[0].Event.SequenceNumber != 4 || !strings.Contains(dead[0].Reason, "filter.keep: unknown: $.seq reads a body that is not JSON") {
		t.Fatalf("dead letters %d, first %+v", len(dead), dead)
	}
	if got := mem.Committed("0"); len(got) != 35-4 {
		t.Fatalf("committed %d events, want 31", len(got))
	}
	if pos, _ := store.get("0"); pos.SequenceNumber != 39 {
		t.Fatalf("final checkpoint %d, want 39", pos.SequenceNumber)
	}
}

// TestRunnerFilterCrashAtEveryStep is TestRunnerCrashAtEveryStep with a
// filter: restarts replay dropped events without writing them twice or
// losing a kept one.
func TestRunnerFilterCrashAtEveryStep(t *testing.T) {
	partitions := []string{"0", "1"}
	const events = 300
	for _, point := range []sinktest.FaultPoint{sinktest.BeforeWrite, sinktest.BeforeCommit, sinktest.AfterCommit} {
		t.Run(fmt.Sprint(point), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(point)), 9))
			sink := sinktest.NewMemory()
			sink.SetFencing(false)
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			var mu sync.Mutex
			countdown := map[string]int{}
			sink.SetFault(func(at sinktest.FaultPoint, partition string) error {
				mu.Lock()
				defer mu.Unlock()
				if at == point {
					if countdown[partition]--; countdown[partition] == 0 {
						crash()
					}
				}
				return nil
			})
			crashes := 0
			for round := 0; ; round++ {
				if round > 500 {
					t.Fatal("no progress after 500 restarts")
				}
				mu.Lock()
				for _, p := range partitions {
					countdown[p] = 1 + rng.IntN(8)
				}
				mu.Unlock()
				if !runProcess(t, sink, store, partitions, events, rng, RunnerOptions{Filter: testFilter()}) {
					break
				}
				crashes++
			}
			if crashes == 0 {
				t.Fatal("the fault never fired")
			}
			for _, p := range partitions {
				var want []int64
				for s := int64(0); s < events; s++ {
					if filterKeeps(s) {
						want = append(want, s)
					}
				}
				if got := sink.Committed(p); !slices.Equal(got, want) {
					t.Fatalf("after %d crashes partition %s holds %d events %v..., want %d exactly once", crashes, p, len(got), head(got), len(want))
				}
			}
		})
	}
}

func TestLoadFilter(t *testing.T) {
	opts := testEnv(nil)
	c, err := loadYAML(t, strings.Replace(minimal, "    sink:", "    filter: {keep: \"$.type in ['order_created', 'order_cancelled']\", drop: \"@properties.test == true\"}\n    sink:", 1), opts)
	if err != nil {
		t.Fatal(err)
	}
	f := c.Connectors[0].Filter
	ok, err := f.Keeps(&sinks.Event{Body: []byte(`{"type":"order_created"}`)}, "")
	if err != nil || !ok {
		t.Fatalf("Keeps = %v, %v", ok, err)
	}
	ok, _ = f.Keeps(&sinks.Event{Body: []byte(`{"type":"order_created"}`), Properties: map[string]any{"test": true}}, "")
	if ok {
		t.Fatal("drop did not drop")
	}
	var buf bytes.Buffer
	if err := c.Print(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `keep: $.type in ['order_created', 'order_cancelled']`) || !strings.Contains(buf.String(), `drop: '@properties.test == true'`) {
		t.Fatalf("Print lacks the filter:\n%s", buf.String())
	}
	back, err := loadYAML(t, buf.String(), opts)
	if err != nil {
		t.Fatalf("Load(Print): %v\n%s", err, buf.String())
	}
	if back.Connectors[0].Filter.Keep.String() != f.Keep.String() {
		t.Fatalf("round trip changed the filter: %s", back.Connectors[0].Filter.Keep)
	}

	for _, tt := range []struct{ filter, path, want string }{
		{`{keep: "$.type"}`, "connectors[0].filter.keep", "column 7: expected operator after $.type"},
		{`{drop: "$.a == 'x' and"}`, "connectors[0].filter.drop", "column 15: unexpected end of expression"},
		{`{}`, "connectors[0].filter", "set keep"},
		{`{keep: [1]}`, "connectors[0].filter.keep", "expected a string"},
		{`{kepe: "true"}`, "connectors[0].filter.kepe", ""},
	} {
		_, err := loadYAML(t, strings.Replace(minimal, "    sink:", "    filter: "+tt.filter+"\n    sink:", 1), opts)
		found := false
		for _, e := range config.Errors(err) {
			found = found || (e.Path == tt.path && strings.Contains(e.Err.Error(), tt.want))
		}
		if !found {
			t.Errorf("filter %s: errors %v, want %s: %s", tt.filter, err, tt.path, tt.want)
		}
	}
}

// heldWriter is a batchingWriter that counts the writes its next flush
// commits.
type heldWriter struct {
	*batchingWriter
	held *int
}

func (w heldWriter) Write(ctx context.Context, events []sinks.Event) error {
	*w.held++
	return w.batchingWriter.Write(ctx, events)
}

func (w heldWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	pos, err := w.batchingWriter.Flush(ctx)
	if err == nil {
		*w.held = 0
	}
	return pos, err
}

type heldSink struct {
	batching
	held *int
}

func (s heldSink) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := s.batching.Open(ctx, p)
	return heldWriter{batchingWriter: w.(*batchingWriter), held: s.held}, wm, err
}

// TestRunnerNoCheckpointWhileGathering: with a checkpoint that comes due
// between flushes, a writer that gathers batches (a Batcher) sees the checkpoint
// written only by the flush that ends the batch (or when nothing is held):
// a checkpoint of an earlier commit written while it gathers may come
// after the sink stopped answering, and other replicas would read it as
// the sink answering here.
func TestRunnerNoCheckpointWhileGathering(t *testing.T) {
	held := 0
	sink := heldSink{batching{sinktest.NewMemory()}, &held}
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 200, store, rand.New(rand.NewPCG(43, 44)), cancel)
	var ckpts, early int
	p.onCkpt = func(sinks.Position) {
		ckpts++
		if held > 0 {
			early++
		}
	}
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r, _ := NewRunner(RunnerOptions{Sink: sink, CheckpointEveryInterval: 15 * time.Second,
		now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if pos, _ := store.get("0"); ckpts == 0 || pos.SequenceNumber != 199 {
		t.Fatalf("%d checkpoints, the last at %d; want some, the last at 199", ckpts, pos.SequenceNumber)
	}
	if early > 0 {
		t.Fatalf("%d of %d checkpoints written while the writer held a batch it had not flushed", early, ckpts)
	}
}
