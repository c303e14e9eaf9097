package connector

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// hangingSink is a sink whose flushes stop answering while hang says so:
// they return only when their ctx ends, with the error a network driver
// gives then (pgx: "timeout: context deadline exceeded"), as a flush over
// a half-open connection does.
type hangingSink struct {
	sinks.Sink
	hang func() bool
}

func (s hangingSink) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := s.Sink.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return hangingWriter{Writer: w, hang: s.hang}, wm, nil
}

type hangingWriter struct {
	sinks.Writer
	hang func() bool
}

func (w hangingWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.hang() {
		<-ctx.Done()
		return nil, fmt.Errorf("timeout: %w", ctx.Err())
	}
	return w.Writer.Flush(ctx)
}

// TestRunnerSinkTimeoutIsFailure: flushes that stop answering (a half-open
// connection) run out of SinkTimeout, and that counts as a transient sink
// failure: retried, not the end of the partition; counted by the breaker,
// which opens (later calls are probes); and reported to readiness
// (sinkCalled) as ErrSinkTimeout. Once the sink answers again everything
// is committed once. Without the deadline the first flush hangs until the
// test's deadline; with the deadline but the timeout taken for a
// cancellation, the partition fails at the first one.
func TestRunnerSinkTimeoutIsFailure(t *testing.T) {
	var (
		mu       sync.Mutex
		hangs    = 6
		r        *Runner
		probes   int
		reported []error
	)
	sink := hangingSink{Sink: sinktest.NewMemory(), hang: func() bool {
		mu.Lock()
		defer mu.Unlock()
		r.brk.mu.Lock()
		if r.brk.state == breakerHalfOpen {
			probes++
		}
		r.brk.mu.Unlock()
		if hangs > 0 {
			hangs--
			return true
		}
		return false
	}}
	r, _ = NewRunner(RunnerOptions{Connector: "c", Sink: sink, SinkTimeout: 20 * time.Millisecond,
		Retry:          RetrySpec{InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
		CircuitBreaker: CircuitBreakerSpec{Failures: 3, ProbeInterval: 5 * time.Millisecond, MaxProbeInterval: 20 * time.Millisecond},
		sinkCalled: func(err error) {
			if err != nil {
				mu.Lock()
				reported = append(reported, err)
				mu.Unlock()
			}
		}})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done, stop := context.WithCancel(ctx)
	defer stop()
	p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(47, 48)), stop)
	if err := r.RunPartition(done, p); err != nil {
		t.Fatalf("RunPartition = %v, want the timed-out flushes retried", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the test's deadline ended the partition: a hung flush was not bounded")
	}
	mu.Lock()
	defer mu.Unlock()
	if hangs != 0 {
		t.Fatalf("%d hung flushes left", hangs)
	}
	if len(reported) < 6 {
		t.Errorf("readiness heard of %d failures, want the 6 timeouts", len(reported))
	}
	for _, err := range reported {
		if !errors.Is(err, ErrSinkTimeout) || !sinks.IsTransient(err) {
			t.Errorf("reported %v, want a transient ErrSinkTimeout", err)
		}
	}
	// 3 timeouts open the breaker; every later flush is a probe.
	if probes < 3 {
		t.Errorf("%d flushes probed a half-open breaker, want at least 3: the timeouts did not open it", probes)
	}
	if got := sink.Sink.(*sinktest.Memory).Committed("0"); len(got) != 100 {
		t.Errorf("%d events committed, want 100", len(got))
	}
}

// TestRunnerCancelIsNotSinkFailure: a sink call cut short by the
// partition's own ctx (shutdown, ownership moving) says nothing of the
// sink: readiness is not told, and the breaker counts nothing.
func TestRunnerCancelIsNotSinkFailure(t *testing.T) {
	var (
		mu       sync.Mutex
		reported []error
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := hangingSink{Sink: sinktest.NewMemory(), hang: func() bool { cancel(); return true }}
	r, _ := NewRunner(RunnerOptions{Connector: "c", Sink: sink, SinkTimeout: time.Minute, DrainTimeout: 50 * time.Millisecond,
		sinkCalled: func(err error) {
			if err != nil {
				mu.Lock()
				reported = append(reported, err)
				mu.Unlock()
			}
		}})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	p := newMemPartition("0", 10, store, rand.New(rand.NewPCG(49, 50)), cancel)
	_ = r.RunPartition(ctx, p) // the drain's flush hangs too: ErrDrainIncomplete
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 0 {
		t.Errorf("readiness told of %v, want nothing: the partition was cancelled", reported)
	}
	r.brk.mu.Lock()
	defer r.brk.mu.Unlock()
	if r.brk.failures != 0 || r.brk.state != breakerClosed {
		t.Errorf("breaker: %d failures, state %d; want none counted", r.brk.failures, r.brk.state)
	}
}

// TestRunnerSinkOwnDeadlineIsNoAnswer: a sink call that fails because a
// bound of the sink's own ran out (pgx's connect timeout over a path that
// accepts connections and answers nothing: "failed to connect: timeout:
// context deadline exceeded") before the sink timeout is no answer either:
// it matches ErrSinkTimeout, transient, and opens the breaker on its own
// rather than count as one of Failures quick refusals.
func TestRunnerSinkOwnDeadlineIsNoAnswer(t *testing.T) {
	r, err := NewRunner(RunnerOptions{Connector: "c", Sink: sinktest.NewMemory(), SinkTimeout: time.Minute,
		CircuitBreaker: CircuitBreakerSpec{Failures: 5, ProbeInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	var first error
	stateAtSecond := -1
	err = r.retry(t.Context(), "flush", callGuard{}, func(ctx context.Context) error {
		calls++
		if calls == 1 {
			own, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-own.Done()
			return sinks.Transient(fmt.Errorf("failed to connect: timeout: %w", own.Err()))
		}
		r.brk.mu.Lock()
		stateAtSecond, first = r.brk.state, r.brk.lastErr
		r.brk.mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !errors.Is(first, ErrSinkTimeout) || !sinks.IsTransient(first) {
		t.Errorf("the breaker counted %v; want a transient ErrSinkTimeout", first)
	}
	if stateAtSecond != breakerHalfOpen {
		t.Errorf("breaker state %d at the call after one own-deadline failure; want half-open (it opened on that one)", stateAtSecond)
	}
}
