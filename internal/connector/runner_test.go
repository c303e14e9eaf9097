package connector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// memCheckpoints is a checkpoint store shared by the "processes" of a test.
type memCheckpoints struct {
	mu  sync.Mutex
	pos map[string]sinks.Position
}

func (c *memCheckpoints) get(p string) (sinks.Position, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pos, ok := c.pos[p]
	return pos, ok
}

// memPartition replays a fixed log from the checkpoint, in random batch
// sizes, and stops the run (cancels it) when the log is exhausted.
type memPartition struct {
	id     string
	log    []sinks.Event
	next   int
	rng    *rand.Rand
	store  *memCheckpoints
	stop   context.CancelFunc
	onCkpt func(pos sinks.Position) // runs after a checkpoint is stored
	lostAt int                      // report ownership lost at this index (-1: never)
}

func newMemPartition(id string, n int, store *memCheckpoints, rng *rand.Rand, stop context.CancelFunc) *memPartition {
	p := &memPartition{id: id, log: sinktest.Events(id, 0, int64(n-1)), rng: rng, store: store, stop: stop, lostAt: -1}
	if pos, ok := store.get(id); ok {
		p.next = int(pos.SequenceNumber) + 1
	}
	return p
}

func (p *memPartition) ID() string { return p.id }

func (p *memPartition) Receive(ctx context.Context) ([]sinks.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if p.lostAt >= 0 && p.next >= p.lostAt {
		return nil, fmt.Errorf("partition %s: %w", p.id, ErrOwnershipLost)
	}
	if p.next >= len(p.log) {
		p.stop()
		return nil, ctx.Err()
	}
	n := min(1+p.rng.IntN(9), len(p.log)-p.next)
	batch := slices.Clone(p.log[p.next : p.next+n])
	p.next += n
	return batch, nil
}

func (p *memPartition) Checkpoint(_ context.Context, pos sinks.Position) error {
	p.store.mu.Lock()
	p.store.pos[p.id] = pos
	p.store.mu.Unlock()
	if p.onCkpt != nil {
		p.onCkpt(pos)
	}
	return nil
}

// crash ends the calling goroutine at once, running only its deferred
// calls: for the runner that is the abrupt stop of a killed process (its
// writer is abandoned, nothing more is committed or checkpointed).
func crash() { runtime.Goexit() }

// runProcess runs one "process" over all partitions until each partition
// is exhausted or crashed; it reports whether any partition crashed.
func runProcess(t *testing.T, sink *sinktest.Memory, store *memCheckpoints, partitions []string, n int, rng *rand.Rand, opts RunnerOptions) (crashed bool) {
	t.Helper()
	opts.Sink = sink
	opts.Connector = "test"
	r, err := NewRunner(opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, id := range partitions {
		ctx, cancel := context.WithCancel(context.Background())
		p := newMemPartition(id, n, store, rand.New(rand.NewPCG(rng.Uint64(), 0)), cancel)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			finished := false
			defer func() {
				if !finished {
					mu.Lock()
					crashed = true
					mu.Unlock()
				}
			}()
			if err := r.RunPartition(ctx, p); err != nil {
				t.Errorf("RunPartition: %v", err)
			}
			finished = true
		}()
	}
	wg.Wait()
	return crashed
}

// TestRunnerCrashAtEveryStep crashes the runner at each step of the
// pipeline, many times at random instants, restarts it, and checks the sink
// output: every event exactly once, in order per partition.
func TestRunnerCrashAtEveryStep(t *testing.T) {
	points := []string{"before-write", "after-write-before-flush", "after-flush-before-checkpoint", "during-checkpoint"}
	partitions := []string{"0", "1", "2"}
	const events = 300
	for _, point := range points {
		t.Run(point, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(len(point)), 7))
			sink := sinktest.NewMemory()
			sink.SetFencing(false) // duplicates must be caught by the runner's own filter
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			crashes := 0
			var armed sync.Map // partition -> countdown *int
			arm := func() {
				for _, p := range partitions {
					n := 1 + rng.IntN(12)
					armed.Store(p, &n)
				}
			}
			fire := func(partition string) bool {
				v, ok := armed.Load(partition)
				if !ok {
					return false
				}
				n := v.(*int)
				*n--
				return *n == 0
			}
			sink.SetFault(func(at sinktest.FaultPoint, partition string) error {
				switch {
				case point == "before-write" && at == sinktest.BeforeWrite,
					point == "after-write-before-flush" && at == sinktest.BeforeCommit,
					point == "after-flush-before-checkpoint" && at == sinktest.AfterCommit:
					if fire(partition) {
						crash()
					}
				}
				return nil
			})
			for round := 0; ; round++ {
				if round > 500 {
					t.Fatal("no progress after 500 restarts")
				}
				arm()
				opts := RunnerOptions{}
				var crashed bool
				if point == "during-checkpoint" {
					crashed = runProcessWithCheckpointCrash(t, sink, store, partitions, events, rng, opts, fire)
				} else {
					crashed = runProcess(t, sink, store, partitions, events, rng, opts)
				}
				if !crashed {
					break
				}
				crashes++
			}
			if crashes == 0 {
				t.Fatal("the fault never fired; the test proves nothing")
			}
			for _, p := range partitions {
				got := sink.Committed(p)
				want := make([]int64, events)
				for i := range want {
					want[i] = int64(i)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("after %d crashes partition %s holds %d events %v..., want 0..%d exactly once in order", crashes, p, len(got), head(got), events-1)
				}
			}
			t.Logf("%d crashes, output exact", crashes)
		})
	}
}

func runProcessWithCheckpointCrash(t *testing.T, sink *sinktest.Memory, store *memCheckpoints, partitions []string, n int, rng *rand.Rand, opts RunnerOptions, fire func(string) bool) bool {
	t.Helper()
	opts.Sink = sink
	r, err := NewRunner(opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	crashed := false
	for _, id := range partitions {
		ctx, cancel := context.WithCancel(context.Background())
		p := newMemPartition(id, n, store, rand.New(rand.NewPCG(rng.Uint64(), 0)), cancel)
		p.onCkpt = func(sinks.Position) {
			if fire(id) {
				crash()
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			ok := false
			defer func() {
				if !ok {
					mu.Lock()
					crashed = true
					mu.Unlock()
				}
			}()
			if err := r.RunPartition(ctx, p); err != nil {
				t.Errorf("RunPartition: %v", err)
			}
			ok = true
		}()
	}
	wg.Wait()
	return crashed
}

func head(s []int64) []int64 { return s[:min(len(s), 12)] }

func TestRunnerCheckpointsOnlyCommitted(t *testing.T) {
	sink := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	var violations []string
	sink.SetFault(func(at sinktest.FaultPoint, p string) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 200, store, rand.New(rand.NewPCG(1, 2)), cancel)
	p.onCkpt = func(pos sinks.Position) {
		committed := sink.Committed("0")
		if len(committed) == 0 || committed[len(committed)-1] < pos.SequenceNumber {
			violations = append(violations, fmt.Sprintf("checkpoint %d ahead of sink %v", pos.SequenceNumber, head(committed)))
		}
	}
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(violations) > 0 {
		t.Fatal(violations)
	}
	if pos, _ := store.get("0"); pos.SequenceNumber != 199 {
		t.Fatalf("final checkpoint %d, want 199", pos.SequenceNumber)
	}
}

func TestRunnerOwnershipLostAbandons(t *testing.T) {
	sink := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(3, 4)), cancel)
	p.lostAt = 40
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatalf("RunPartition after loss = %v, want nil", err)
	}
	pos, ok := store.get("0")
	committed := sink.Committed("0")
	if ok && (len(committed) == 0 || pos.SequenceNumber > committed[len(committed)-1]) {
		t.Fatalf("checkpoint %v beyond committed %v", pos, head(committed))
	}
}

// TestRunnerDeadLettersAndTolerance: events the sink rejects in Write (a
// value that does not convert) or refuses at Flush (a database constraint)
// are dead-lettered and the rest committed, or stop the partition under
// tolerance none.
func TestRunnerDeadLettersAndTolerance(t *testing.T) {
	reject := func(ev *sinks.Event) error {
		if ev.SequenceNumber%10 == 3 {
			return errors.New("amount is not a number")
		}
		return nil
	}
	for _, at := range []struct {
		name    string
		install func(*sinktest.Memory, func(*sinks.Event) error)
	}{
		{"write", (*sinktest.Memory).SetReject},
		{"flush", (*sinktest.Memory).SetRefuse},
	} {
		t.Run(at.name+"/all", func(t *testing.T) {
			sink := sinktest.NewMemory()
			at.install(sink, reject)
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			ctx, cancel := context.WithCancel(context.Background())
			p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(5, 6)), cancel)
			r, _ := NewRunner(RunnerOptions{Sink: sink, Tolerance: "all"})
			if err := r.RunPartition(ctx, p); err != nil {
				t.Fatal(err)
			}
			committed := sink.Committed("0")
			if len(committed) != 90 || slices.ContainsFunc(committed, func(s int64) bool { return s%10 == 3 }) {
				t.Fatalf("committed %d events %v, want the 90 not rejected", len(committed), head(committed))
			}
			dead := sink.DeadLetters("0")
			if len(dead) != 10 || dead[0].Event.SequenceNumber != 3 || dead[0].Reason != "amount is not a number" {
				t.Fatalf("dead letters = %d, first %+v", len(dead), dead[0])
			}
			if pos, _ := store.get("0"); pos.SequenceNumber != 99 {
				t.Fatalf("checkpoint %d, want 99", pos.SequenceNumber)
			}
		})
		t.Run(at.name+"/none", func(t *testing.T) {
			sink := sinktest.NewMemory()
			at.install(sink, reject)
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(5, 6)), cancel)
			r, _ := NewRunner(RunnerOptions{Connector: "orders", Sink: sink, Tolerance: "none"})
			err := r.RunPartition(ctx, p)
			if err == nil || !containsAll(err.Error(), `connector "orders"`, "partition 0", "seq 3", "amount is not a number") {
				t.Fatalf("RunPartition = %v, want an error naming connector, partition, seq and reason", err)
			}
			if pos, ok := store.get("0"); ok && pos.SequenceNumber >= 3 {
				t.Fatalf("checkpoint %d moved past the rejected event", pos.SequenceNumber)
			}
		})
	}
}

func TestRunnerRetriesTransient(t *testing.T) {
	sink := sinktest.NewMemory()
	failures := 3
	var mu sync.Mutex
	sink.SetFault(func(at sinktest.FaultPoint, p string) error {
		mu.Lock()
		defer mu.Unlock()
		if at == sinktest.BeforeCommit && failures > 0 {
			failures--
			return sinks.Transient(errors.New("connection refused"))
		}
		return nil
	})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 50, store, rand.New(rand.NewPCG(8, 9)), cancel)
	r, _ := NewRunner(RunnerOptions{Sink: sink, Retry: RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if failures != 0 {
		t.Fatalf("%d injected failures left", failures)
	}
	if got := sink.Committed("0"); len(got) != 50 {
		t.Fatalf("%d events committed, want 50", len(got))
	}

	// A permanent error is not retried.
	sink2 := sinktest.NewMemory()
	sink2.SetFault(func(at sinktest.FaultPoint, p string) error {
		if at == sinktest.BeforeCommit {
			return errors.New(`relation "orders" does not exist`)
		}
		return nil
	})
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	p2 := newMemPartition("0", 50, &memCheckpoints{pos: map[string]sinks.Position{}}, rand.New(rand.NewPCG(8, 9)), cancel2)
	r2, _ := NewRunner(RunnerOptions{Sink: sink2})
	if err := r2.RunPartition(ctx2, p2); err == nil || !containsAll(err.Error(), "flush", "does not exist") {
		t.Fatalf("permanent failure: %v", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRunnerWatermarkWhileRunning: while a partition runs, its watermark is
// answered by the runner (no second writer is opened on the sink); after it
// stops, the runner no longer claims it.
func TestRunnerWatermarkWhileRunning(t *testing.T) {
	sink := sinktest.NewMemory()
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("7", 60, store, rand.New(rand.NewPCG(11, 12)), cancel)
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	var seen []int64
	p.onCkpt = func(pos sinks.Position) {
		wm, ok := r.Watermark("7")
		if !ok || wm == nil || wm.SequenceNumber != pos.SequenceNumber {
			t.Errorf("Watermark during run = %v, %v; want seq %d", wm, ok, pos.SequenceNumber)
			return
		}
		seen = append(seen, wm.SequenceNumber)
	}
	if _, ok := r.Watermark("7"); ok {
		t.Fatal("Watermark before the partition runs")
	}
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1] != 59 {
		t.Fatalf("watermarks seen during the run: %v", seen)
	}
	if _, ok := r.Watermark("7"); ok {
		t.Fatal("Watermark still answered after the partition stopped")
	}
}

// TestRunnerFencedGivesUp: a flush that reports another writer committed the
// partition ends the partition quietly, without a checkpoint past what this
// run committed.
func TestRunnerFencedGivesUp(t *testing.T) {
	sink := sinktest.NewMemory()
	flushes := fenceFlushes(sink, 3)
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(13, 14)), cancel)
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatalf("RunPartition after a fenced flush = %v, want nil", err)
	}
	committed := sink.Committed("0")
	pos, _ := store.get("0")
	if *flushes != 3 || len(committed) == 0 || pos.SequenceNumber != committed[len(committed)-1] {
		t.Fatalf("flushes %d, checkpoint %d, committed up to %v", *flushes, pos.SequenceNumber, head(committed))
	}
}

// fenceFlushes makes the flushes of sink numbered at (from 1) fail with
// ErrFenced, as a writer another owner committed past; it returns the
// count of flushes.
func fenceFlushes(sink *sinktest.Memory, at ...int) *int {
	flushes := new(int)
	sink.SetFault(func(point sinktest.FaultPoint, _ string) error {
		if point != sinktest.BeforeCommit {
			return nil
		}
		*flushes++
		if slices.Contains(at, *flushes) {
			return fmt.Errorf("seq overlaps a newer file: %w", sinks.ErrFenced)
		}
		return nil
	})
	return flushes
}

// seekPartition is a memPartition that can move its reading (a seeker),
// as the source's partitions can.
type seekPartition struct {
	*memPartition
	seeks []int64
}

func (p *seekPartition) Seek(pos sinks.Position) error {
	p.seeks = append(p.seeks, pos.SequenceNumber)
	p.next = int(pos.SequenceNumber) + 1
	return nil
}

// TestRunnerFencedReadsOn: a partition that can seek meets the first fence
// after its claim by reading on after the sink's watermark, with the
// partition kept (no release, no round of the load balancer), and a
// second fence ends it as before. Every event is committed once.
func TestRunnerFencedReadsOn(t *testing.T) {
	for _, tt := range []struct {
		name   string
		fences []int // the flushes that are fenced
		seeks  int
		all    bool // every event committed
	}{
		{"one fence", []int{3}, 1, true},
		{"two fences", []int{3, 6}, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := sinktest.NewMemory()
			fenceFlushes(sink, tt.fences...)
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &seekPartition{memPartition: newMemPartition("0", 100, store, rand.New(rand.NewPCG(15, 16)), cancel)}
			r, _ := NewRunner(RunnerOptions{Sink: sink})
			if err := r.RunPartition(ctx, p); err != nil {
				t.Fatalf("RunPartition = %v, want nil", err)
			}
			committed := sink.Committed("0")
			for i, seq := range committed {
				if seq != int64(i) {
					t.Fatalf("committed %v...: event %d is %d (a gap or a duplicate)", head(committed[max(0, i-3):]), i, seq)
				}
			}
			pos, _ := store.get("0")
			if len(p.seeks) != tt.seeks || len(committed) == 0 || pos.SequenceNumber != committed[len(committed)-1] ||
				tt.all != (len(committed) == 100) {
				t.Fatalf("seeks %v (want %d), %d events committed, checkpoint %d", p.seeks, tt.seeks, len(committed), pos.SequenceNumber)
			}
		})
	}
}

// TestRunnerCheckpointPolicy: checkpoints are spaced by events or time, and
// a partition that stops cleanly always checkpoints what it committed.
func TestRunnerCheckpointPolicy(t *testing.T) {
	tests := []struct {
		name     string
		events   int
		interval time.Duration
		min, max int // bounds on the number of checkpoints for 200 events
	}{
		{"every flush", 0, 0, 25, 200},
		{"every 50 events", 50, 0, 4, 5},
		{"every hour", 0, time.Hour, 1, 2}, // the final one, and one more where the random phase (checkpointPhase) ends inside the run
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := sinktest.NewMemory()
			store := &memCheckpoints{pos: map[string]sinks.Position{}}
			ctx, cancel := context.WithCancel(context.Background())
			p := newMemPartition("0", 200, store, rand.New(rand.NewPCG(21, 22)), cancel)
			var ckpts []int64
			p.onCkpt = func(pos sinks.Position) { ckpts = append(ckpts, pos.SequenceNumber) }
			clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			r, _ := NewRunner(RunnerOptions{Sink: sink, CheckpointEveryEvents: tt.events, CheckpointEveryInterval: tt.interval,
				now: func() time.Time { clock = clock.Add(time.Second); return clock }})
			if err := r.RunPartition(ctx, p); err != nil {
				t.Fatal(err)
			}
			if len(ckpts) < tt.min || len(ckpts) > tt.max {
				t.Fatalf("%d checkpoints %v, want %d to %d", len(ckpts), ckpts, tt.min, tt.max)
			}
			if last := ckpts[len(ckpts)-1]; last != 199 {
				t.Fatalf("final checkpoint %d, want 199", last)
			}
			if tt.events > 0 {
				for i := 1; i < len(ckpts)-1; i++ {
					if ckpts[i]-ckpts[i-1] < int64(tt.events) {
						t.Fatalf("checkpoints %v closer than %d events", ckpts, tt.events)
					}
				}
			}
		})
	}
}

// offsetless wraps a sink whose watermarks carry no offset, as a sink that
// keeps only sequence numbers does.
type offsetless struct{ sinks.Sink }

func (o offsetless) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := o.Sink.Open(ctx, p)
	return offsetlessWriter{w}, strip(wm), err
}

type offsetlessWriter struct{ sinks.Writer }

func (w offsetlessWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	wm, err := w.Writer.Flush(ctx)
	return strip(wm), err
}

func strip(p *sinks.Position) *sinks.Position {
	if p == nil {
		return nil
	}
	return &sinks.Position{SequenceNumber: p.SequenceNumber}
}

// TestRunnerFillsCheckpointOffset: checkpoints carry the offset of the
// committed event even when the sink reports only its sequence number
// (checkpoint stores refuse a checkpoint without one).
func TestRunnerFillsCheckpointOffset(t *testing.T) {
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithCancel(context.Background())
	p := newMemPartition("0", 30, store, rand.New(rand.NewPCG(31, 32)), cancel)
	var offsets []string
	p.onCkpt = func(pos sinks.Position) { offsets = append(offsets, pos.Offset) }
	r, _ := NewRunner(RunnerOptions{Sink: offsetless{sinktest.NewMemory()}})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	pos, _ := store.get("0")
	if len(offsets) == 0 || pos.SequenceNumber != 29 || pos.Offset != sinktest.Event("0", 29).Offset {
		t.Fatalf("final checkpoint %+v, want seq 29 with its offset", pos)
	}
	for i, o := range offsets {
		if o == "" {
			t.Fatalf("checkpoint %d has no offset", i)
		}
	}
}

// TestRunnerDrainIncomplete: a drain that cannot commit within its timeout
// is reported as such, never as a plain cancellation.
func TestRunnerDrainIncomplete(t *testing.T) {
	sink := sinktest.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink.SetFault(func(at sinktest.FaultPoint, p string) error {
		if at == sinktest.BeforeCommit {
			cancel() // the process is told to stop while the sink is down
			return sinks.Transient(errors.New("connection refused"))
		}
		return nil
	})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	p := newMemPartition("0", 30, store, rand.New(rand.NewPCG(33, 34)), func() {})
	r, _ := NewRunner(RunnerOptions{Sink: sink, DrainTimeout: 20 * time.Millisecond,
		Retry: RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	err := r.RunPartition(ctx, p)
	if !errors.Is(err, ErrDrainIncomplete) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("RunPartition = %v, want ErrDrainIncomplete and no context error", err)
	}
	if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "not committed") {
		t.Fatalf("error %q does not say what was not committed and why", err)
	}
	if _, ok := store.get("0"); ok {
		t.Fatal("a checkpoint was written although nothing was committed")
	}
}
