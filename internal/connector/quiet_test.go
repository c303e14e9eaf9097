package connector

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// quietPartition serves its events, then only empty batches, as a partition
// that went quiet; its checkpoint store fails the first failCkpt calls.
type quietPartition struct {
	id       string
	events   []sinks.Event
	stored   int64 // StoredCheckpoint's answer
	known    bool
	failCkpt int

	mu       sync.Mutex
	attempts int
	ckpts    []int64
	beats    atomic.Int64
	ckptHook func() // runs inside each Checkpoint call, before it answers
}

func (p *quietPartition) ID() string { return p.id }

func (p *quietPartition) Receive(ctx context.Context) ([]sinks.Event, error) {
	p.mu.Lock()
	if len(p.events) > 0 {
		n := min(10, len(p.events))
		b := slices.Clone(p.events[:n])
		p.events = p.events[n:]
		p.mu.Unlock()
		return b, nil
	}
	p.mu.Unlock()
	t := time.NewTimer(5 * time.Millisecond) // the batch wait
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		return nil, nil
	}
}

func (p *quietPartition) Checkpoint(_ context.Context, pos sinks.Position) error {
	if p.ckptHook != nil {
		p.ckptHook()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if p.attempts <= p.failCkpt {
		return errors.New("checkpoint store unreachable")
	}
	p.ckpts = append(p.ckpts, pos.SequenceNumber)
	return nil
}

func (p *quietPartition) Heartbeat() { p.beats.Add(1) }

func (p *quietPartition) checkpoints() (attempts int, written []int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts, slices.Clone(p.ckpts)
}

// storedPartition adds StoredCheckpoint to a quietPartition; without it the
// stored checkpoint is not known.
type storedPartition struct{ *quietPartition }

func (p storedPartition) StoredCheckpoint() (int64, bool) { return p.stored, p.known }

// commitTo makes sink hold events 0..last of partition p, as an earlier
// owner would have left them.
func commitTo(t *testing.T, sink *sinktest.Memory, p string, last int64) {
	t.Helper()
	w, _, err := sink.Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(context.Background(), sinktest.Events(p, 0, last)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// runQuiet runs src until cond holds (failing after a generous deadline),
// then stops it; RunPartition must return nil.
func runQuiet(t *testing.T, r *Runner, src Partition, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.RunPartition(ctx, src) }()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("RunPartition returned before %s: %v", what, err)
		case <-deadline.C:
			cancel()
			<-done
			t.Fatalf("not done after 30s: %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunPartition: %v", err)
	}
}

// TestRunnerQuietPartitionCatchesUp: a partition opened with its sink's
// watermark past the stored checkpoint (the last checkpoint of the previous
// owner failed) and that receives nothing more gets its checkpoint to the
// watermark, through checkpoint failures, whatever the checkpoint policy.
func TestRunnerQuietPartitionCatchesUp(t *testing.T) {
	for _, tt := range []struct {
		name     string
		events   int
		interval time.Duration
	}{
		{"every flush", 0, 0},
		{"every 1000 events", 1000, 0},
		{"every hour", 0, time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := sinktest.NewMemory()
			commitTo(t, sink, "0", 49)
			p := &quietPartition{id: "0", stored: 19, known: true, failCkpt: 3}
			r, _ := NewRunner(RunnerOptions{Sink: sink, CheckpointEveryEvents: tt.events, CheckpointEveryInterval: tt.interval,
				Retry: RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}})
			runQuiet(t, r, storedPartition{p}, "checkpoint 49 written", func() bool {
				_, w := p.checkpoints()
				return slices.Contains(w, 49)
			})
			if attempts, w := p.checkpoints(); attempts != 4 || !slices.Equal(w, []int64{49}) {
				t.Fatalf("%d checkpoint attempts writing %v, want 4 writing [49] (3 failed, then one)", attempts, w)
			}
		})
	}
}

// TestRunnerQuietPartitionWritesNothingNeeded: no checkpoint is written at
// open when the stored one already covers the watermark, or is not known
// (it may have been moved past the sink on purpose).
func TestRunnerQuietPartitionWritesNothingNeeded(t *testing.T) {
	for _, tt := range []struct {
		name string
		src  func(*quietPartition) Partition
	}{
		{"stored at the watermark", func(p *quietPartition) Partition { p.stored, p.known = 49, true; return storedPartition{p} }},
		{"stored past the watermark", func(p *quietPartition) Partition { p.stored, p.known = 80, true; return storedPartition{p} }},
		{"stored unknown", func(p *quietPartition) Partition { p.stored, p.known = -1, false; return storedPartition{p} }},
		{"no StoredCheckpoint", func(p *quietPartition) Partition { return p }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sink := sinktest.NewMemory()
			commitTo(t, sink, "0", 49)
			p := &quietPartition{id: "0"}
			src := tt.src(p)
			r, _ := NewRunner(RunnerOptions{Sink: sink})
			var idle atomic.Int64
			// Many idle batches, then a clean stop: nothing to checkpoint.
			runQuiet(t, r, countingIdle{src, &idle}, "20 idle batches", func() bool { return idle.Load() >= 20 })
			if attempts, w := p.checkpoints(); attempts != 0 {
				t.Fatalf("%d checkpoint attempts writing %v, want none", attempts, w)
			}
		})
	}
	// With no stored checkpoint at all, the watermark is checkpointed.
	sink := sinktest.NewMemory()
	commitTo(t, sink, "0", 49)
	p := &quietPartition{id: "0", stored: -1, known: true}
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	runQuiet(t, r, storedPartition{p}, "checkpoint 49 written", func() bool {
		_, w := p.checkpoints()
		return slices.Contains(w, 49)
	})
}

// countingIdle counts the empty batches a partition hands out.
type countingIdle struct {
	Partition
	idle *atomic.Int64
}

func (c countingIdle) Receive(ctx context.Context) ([]sinks.Event, error) {
	ev, err := c.Partition.Receive(ctx)
	if err == nil && len(ev) == 0 {
		c.idle.Add(1)
	}
	return ev, err
}

func (c countingIdle) StoredCheckpoint() (int64, bool) {
	if sc, ok := c.Partition.(storedCheckpointer); ok {
		return sc.StoredCheckpoint()
	}
	return 0, false
}

// TestRunnerFailedCheckpointBacksOff: while the checkpoint store fails, the
// partition keeps committing batches without trying the store at every
// one of them (each attempt can take the store client's whole retry time).
func TestRunnerFailedCheckpointBacksOff(t *testing.T) {
	sink := sinktest.NewMemory()
	p := &quietPartition{id: "0", events: sinktest.Events("0", 0, 199), failCkpt: 1 << 30}
	r, _ := NewRunner(RunnerOptions{Sink: sink, Retry: RetrySpec{InitialBackoff: time.Hour, MaxBackoff: time.Hour}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.RunPartition(ctx, p) }()
	deadline := time.After(30 * time.Second)
	for len(sink.Committed("0")) < 200 {
		select {
		case err := <-done:
			t.Fatalf("RunPartition returned early: %v", err)
		case <-deadline:
			t.Fatalf("%d of 200 events committed after 30s", len(sink.Committed("0")))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if attempts, _ := p.checkpoints(); attempts != 1 {
		t.Fatalf("%d checkpoint attempts over 20 batches while the store fails, want 1 (then a backoff of an hour)", attempts)
	}
	cancel()
	if err := <-done; !errors.Is(err, ErrDrainIncomplete) {
		t.Fatalf("RunPartition = %v, want ErrDrainIncomplete (the final checkpoint failed)", err)
	}
}

// TestRunnerCheckpointHeartbeats: a checkpoint call that takes long (a
// store client retrying) heartbeats, so the source's watchdog does not take
// the partition for a stuck one.
func TestRunnerCheckpointHeartbeats(t *testing.T) {
	sink := sinktest.NewMemory()
	p := &quietPartition{id: "0", events: sinktest.Events("0", 0, 9)}
	var (
		once sync.Once
		beat atomic.Bool
	)
	p.ckptHook = func() {
		// The first checkpoint answers only once the partition heartbeat
		// twice while it waited (or after 30s, failing the test).
		once.Do(func() {
			from := p.beats.Load()
			deadline := time.After(30 * time.Second)
			for p.beats.Load() < from+2 {
				select {
				case <-deadline:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			beat.Store(true)
		})
	}
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	runQuiet(t, r, p, "checkpoint 9 written", func() bool {
		_, w := p.checkpoints()
		return slices.Contains(w, 9)
	})
	if !beat.Load() {
		t.Fatal("no heartbeat during a checkpoint call that waited 30s")
	}
}

// TestRunnerStatusShowsStoredCheckpoint: a partition's status shows the
// checkpoint found at the claim, written by an earlier process, before
// this run writes one (here it writes none: the stored one covers the
// sink).
func TestRunnerStatusShowsStoredCheckpoint(t *testing.T) {
	sink := sinktest.NewMemory()
	commitTo(t, sink, "0", 49)
	p := &quietPartition{id: "0", stored: 49, known: true}
	r, _ := NewRunner(RunnerOptions{Sink: sink})
	runQuiet(t, r, storedPartition{p}, "the status showing checkpoint 49", func() bool {
		snap := r.snapshot()
		return len(snap) == 1 && snap[0].checkpoint != nil && *snap[0].checkpoint == 49
	})
	if attempts, w := p.checkpoints(); attempts != 0 {
		t.Errorf("%d checkpoint attempts writing %v, want none: the stored checkpoint covers the sink", attempts, w)
	}
}
