package connector

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// countingPartition counts the Receive calls made while the sink is down.
type countingPartition struct {
	*memPartition
	sinkDown       func() bool
	receivesInDown atomic.Int32
}

func (p *countingPartition) Receive(ctx context.Context) ([]sinks.Event, error) {
	if p.sinkDown() {
		p.receivesInDown.Add(1)
	}
	return p.memPartition.Receive(ctx)
}

// TestRunnerCircuitBreaker: a sink down for its first 15 commits, under two
// partitions. After 3 failures the breaker opens; from then on every sink
// call is the one probe of a half-open breaker (no partition hammers the
// sink), each partition receives at most two batches until the sink is
// back (the one it cannot commit and the one received ahead of it), and
// the breaker closes on the first successful probe. Nothing is lost or
// written twice.
func TestRunnerCircuitBreaker(t *testing.T) {
	sink := sinktest.NewMemory()
	var (
		mu            sync.Mutex
		failures      = 15
		r             *Runner
		callsOpen     int // sink calls while the breaker was open (none allowed)
		callsHalfOpen int // probes
	)
	state := func() int {
		r.brk.mu.Lock()
		defer r.brk.mu.Unlock()
		return r.brk.state
	}
	sink.SetFault(func(at sinktest.FaultPoint, p string) error {
		if at != sinktest.BeforeCommit {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch state() {
		case breakerOpen:
			callsOpen++
		case breakerHalfOpen:
			callsHalfOpen++
		}
		if failures > 0 {
			failures--
			return sinks.Transient(errors.New("connection refused"))
		}
		return nil
	})
	sinkDown := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return failures > 0
	}
	met, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r, _ = NewRunner(RunnerOptions{Connector: "c", Sink: sink, Metrics: met,
		Retry:          RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		CircuitBreaker: CircuitBreakerSpec{Failures: 3, ProbeInterval: 5 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond}})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := &countingPartition{memPartition: newMemPartition("0", 100, store, rand.New(rand.NewPCG(41, 42)), cancelA), sinkDown: sinkDown}
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	b := &countingPartition{memPartition: newMemPartition("1", 100, store, rand.New(rand.NewPCG(43, 44)), cancelB), sinkDown: sinkDown}

	errs := make(chan error, 2)
	go func() { errs <- r.RunPartition(ctxA, a) }()
	go func() { errs <- r.RunPartition(ctxB, b) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if failures != 0 {
		t.Fatalf("%d injected failures left", failures)
	}
	// A call of the other partition may have been let through just before
	// the breaker opened and reach the sink just after: at most one.
	if callsOpen > 1 {
		t.Errorf("%d sink calls while the breaker was open, want at most 1", callsOpen)
	}
	// Before it opens: the 3 failures that open it, plus the other
	// partition's call if it was admitted while the breaker was still
	// closed (it then reaches the sink either just before or just after
	// the breaker opens). Every other failure must have been a probe.
	if want := 15 - 3 - 2; callsHalfOpen < want {
		t.Errorf("%d probes, want at least %d (every call after the breaker opened)", callsHalfOpen, want)
	}
	for _, p := range []*countingPartition{a, b} {
		if n := p.receivesInDown.Load(); n > 2 {
			t.Errorf("partition %s received %d batches while the sink was down, want at most 2 (one in hand, one ahead)", p.id, n)
		}
	}
	for _, id := range []string{"0", "1"} {
		got := sink.Committed(id)
		if len(got) != 100 {
			t.Fatalf("partition %s: %d events committed, want 100", id, len(got))
		}
		for i, seq := range got {
			if seq != int64(i) {
				t.Fatalf("partition %s: position %d holds seq %d", id, i, seq)
			}
		}
	}
	if v := testutil.ToFloat64(met.breaker.WithLabelValues("c")); v != breakerClosed {
		t.Errorf("ehsink_circuit_breaker_state %v after the outage, want closed (0)", v)
	}
}

// TestRunnerGivesUpAfterLongOutage: a sink down for good. Once the breaker
// has been open for longer than GiveUpAfter, the partition stops with
// ErrSinkUnavailable (so the source gives its lease up), abandoning what
// was not flushed and checkpointing nothing.
func TestRunnerGivesUpAfterLongOutage(t *testing.T) {
	sink := sinktest.NewMemory()
	sink.SetFault(func(at sinktest.FaultPoint, p string) error {
		if at == sinktest.BeforeCommit {
			return sinks.Transient(errors.New("connection refused"))
		}
		return nil
	})
	r, _ := NewRunner(RunnerOptions{Connector: "c", Sink: sink, GiveUpAfter: 300 * time.Millisecond,
		Retry:          RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		CircuitBreaker: CircuitBreakerSpec{Failures: 2, ProbeInterval: 10 * time.Millisecond, MaxProbeInterval: 50 * time.Millisecond}})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newMemPartition("0", 50, store, rand.New(rand.NewPCG(45, 46)), cancel)
	err := r.RunPartition(ctx, p)
	if !errors.Is(err, ErrSinkUnavailable) || !containsAll(err.Error(), "connection refused") {
		t.Fatalf("RunPartition = %v, want ErrSinkUnavailable with the last sink error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the partition ran to its end; it should have given up first")
	}
	if _, ok := store.get("0"); ok {
		t.Fatal("a checkpoint was written although nothing was committed")
	}
	if got := sink.Committed("0"); len(got) != 0 {
		t.Fatalf("%d events committed by a sink that never answered", len(got))
	}
}

// TestStopWhileGivingUp: the process is stopped (ctx cancelled) while the
// sink is down; the drain's flush then waits on the breaker until the
// partition gives up. That is the give-up it would have been without the
// stop (ErrSinkUnavailable: the lease goes to a replica whose sink
// answers, nothing is checkpointed), not a drain that failed, which makes
// the process exit 1 (the chaos matrix's SIGTERM restart saw it so).
func TestStopWhileGivingUp(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var once sync.Once
	sink := sinktest.NewMemory()
	sink.SetFault(func(at sinktest.FaultPoint, p string) error {
		if at == sinktest.BeforeCommit {
			once.Do(cancel) // the stop comes while the sink is down
			return sinks.Transient(errors.New("connection refused"))
		}
		return nil
	})
	r, _ := NewRunner(RunnerOptions{Connector: "c", Sink: sink, GiveUpAfter: 300 * time.Millisecond, DrainTimeout: time.Minute,
		Retry:          RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond},
		CircuitBreaker: CircuitBreakerSpec{Failures: 2, ProbeInterval: 10 * time.Millisecond, MaxProbeInterval: 50 * time.Millisecond}})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	p := newMemPartition("0", 50, store, rand.New(rand.NewPCG(47, 48)), func() {})
	err := r.RunPartition(ctx, p)
	if !errors.Is(err, ErrSinkUnavailable) || errors.Is(err, ErrDrainIncomplete) {
		t.Fatalf("RunPartition = %v, want ErrSinkUnavailable (given up), not ErrDrainIncomplete", err)
	}
	if _, ok := store.get("0"); ok {
		t.Fatal("a checkpoint was written although nothing was committed")
	}
}
