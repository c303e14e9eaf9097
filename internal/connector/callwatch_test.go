package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// answering is a sink call whose destination answers (sinks.Progress)
// every tick until answers calls have been reported, then goes silent; it
// returns nil after done answers, or ctx's end as a network driver
// reports it.
func answering(tick time.Duration, answers, done int) func(context.Context) error {
	return func(ctx context.Context) error {
		progress := sinks.Progress(ctx)
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; {
			select {
			case <-ctx.Done():
				return fmt.Errorf("timeout: %w", ctx.Err())
			case <-tk.C:
			}
			if n == done {
				return nil
			}
			if n < answers && progress != nil {
				progress()
				n++
			}
		}
	}
}

// TestSinkTimeoutBoundsSilence: errors.sink_timeout ends a sink call whose
// destination stopped answering, not one that answers slowly. A call that
// reports answers runs past SinkTimeout and succeeds without a failure
// counted; one whose answers stop fails SinkTimeout after the last, as
// ErrSinkTimeout (transient, opening the breaker), and its ctx ends as a
// deadline would; one that keeps answering without finishing fails at
// callBound; a commit past SinkTimeout whose lease stops passing
// checkLease ends as a lost ownership, which the breaker does not count.
func TestSinkTimeoutBoundsSilence(t *testing.T) {
	const timeout = 200 * time.Millisecond // ticks of a tenth: a loaded machine may delay one a few times over
	errLease := fmt.Errorf("%w: the lease runs out", ErrOwnershipLost)
	for _, tc := range []struct {
		name    string
		fn      func(context.Context) error
		lease   func(start time.Time) func() error
		want    error // nil: success
		message string
		opened  bool
	}{
		{name: "answers slowly", fn: answering(timeout/10, 30, 30)},
		{name: "answers stop", fn: answering(timeout/10, 12, -1), want: ErrSinkTimeout, message: "no answer within", opened: true},
		{name: "silent from the start", fn: answering(timeout/10, 0, -1), want: ErrSinkTimeout, message: "no answer within", opened: true},
		{name: "answers without end", fn: answering(timeout/10, 1<<30, -1), want: ErrSinkTimeout, message: "although its destination answered", opened: true},
		{name: "lease runs out in a slow commit", fn: answering(timeout/10, 1<<30, -1), want: ErrOwnershipLost,
			lease: func(start time.Time) func() error {
				return func() error {
					if time.Since(start) > 3*timeout {
						return errLease
					}
					return nil
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRunner(RunnerOptions{Connector: "c", Sink: sinktest.NewMemory(), SinkTimeout: timeout, GiveUpAfter: 5 * timeout, Retry: RetrySpec{MaxAttempts: 1},
				CircuitBreaker: CircuitBreakerSpec{Failures: 5, ProbeInterval: time.Hour}})
			if err != nil {
				t.Fatal(err)
			}
			var g callGuard
			if tc.lease != nil {
				g.lease = tc.lease(time.Now())
			}
			var ctxErr error
			err = r.retry(t.Context(), "flush", g, func(ctx context.Context) error {
				err := tc.fn(ctx)
				ctxErr = ctx.Err()
				return err
			})
			switch {
			case tc.want == nil && err != nil:
				t.Fatalf("retry = %v, want success", err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("retry = %v, want %v", err, tc.want)
			case tc.message != "" && !strings.Contains(fmt.Sprint(err), tc.message):
				t.Errorf("retry = %v, want it to say %q", err, tc.message)
			}
			if errors.Is(tc.want, ErrSinkTimeout) {
				if !sinks.IsTransient(err) {
					t.Errorf("retry = %v, want it transient", err)
				}
				if !errors.Is(ctxErr, context.DeadlineExceeded) {
					t.Errorf("the call's ctx ended with %v, want context.DeadlineExceeded as under a fixed deadline", ctxErr)
				}
			}
			if opened := !r.brk.isClosed(); opened != tc.opened {
				t.Errorf("breaker open: %v, want %v", opened, tc.opened)
			}
		})
	}
}

// slowWriter is a writer whose flushes answer (sinks.Progress) every tick
// for took before they commit, as a flush over a slow path does; it
// records when its inner writer committed.
type slowWriter struct {
	sinks.Writer
	tick, took time.Duration
	committed  *atomic.Int64 // unix nanoseconds of the last commit
}

func (w slowWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	if err := answering(w.tick, 1<<30, int(w.took/w.tick))(ctx); err != nil {
		return nil, err
	}
	wm, err := w.Writer.Flush(ctx)
	if err == nil {
		w.committed.Store(time.Now().UnixNano())
	}
	return wm, err
}

type slowSink struct {
	sinks.Sink
	tick, took time.Duration
	committed  *atomic.Int64
}

func (s slowSink) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := s.Sink.Open(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	return slowWriter{Writer: w, tick: s.tick, took: s.took, committed: s.committed}, wm, nil
}

// TestSlowCommitStopsBeforeLeaseRunsOut: a partition's lease is no longer
// renewed, and its flushes, answering all along, take longer than
// SinkTimeout. A flush that started with the margin checkLease asks for
// may run past SinkTimeout, but not into the last margin of the lease:
// it is cut there and the partition ends as a lost ownership (not a sink
// failure: the breaker stays closed). Nothing is committed after the
// lease ran out. Without the lease check during the call, the slow flush
// commits after the expiry.
func TestSlowCommitStopsBeforeLeaseRunsOut(t *testing.T) {
	const (
		timeout = 200 * time.Millisecond
		lease   = 6 * timeout
	)
	var committed atomic.Int64
	sink := slowSink{Sink: sinktest.NewMemory(), tick: timeout / 10, took: 2 * lease, committed: &committed}
	r, err := NewRunner(RunnerOptions{Connector: "c", Sink: sink, SinkTimeout: timeout, GiveUpAfter: time.Minute,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p := &leasedPartition{memPartition: newMemPartition("0", 1000, store, rand.New(rand.NewPCG(53, 54)), cancel)}
	expiry := time.Now().Add(lease)
	p.expiry.Store(expiry.UnixNano())
	err = r.RunPartition(ctx, p)
	if !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("RunPartition = %v, want ErrOwnershipLost before the lease runs out", err)
	}
	if at := committed.Load(); at != 0 && !time.Unix(0, at).Before(expiry) {
		t.Errorf("a commit landed %s after the lease ran out", time.Unix(0, at).Sub(expiry))
	}
	if !r.brk.isClosed() {
		t.Error("the breaker opened: a lease running out is no sink failure")
	}
}

// openingSink is a sink whose Open runs fn first.
type openingSink struct {
	sinks.Sink
	fn func(context.Context) error
}

func (s openingSink) Open(ctx context.Context, p string) (sinks.Writer, *sinks.Position, error) {
	if err := s.fn(ctx); err != nil {
		return nil, nil, err
	}
	return s.Sink.Open(ctx, p)
}

// TestSlowClaimIsNoSinkFailure: a claim's Open bounded by the claim's
// budget (shorter than a slow sink needs for a new session) fails when
// the budget runs out; if the sink was answering then, that is no sink
// failure: the breaker stays closed and readiness hears nothing. An Open
// that got no answer is, as before: ErrSinkTimeout, the breaker open.
func TestSlowClaimIsNoSinkFailure(t *testing.T) {
	const timeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name     string
		fn       func(context.Context) error
		failure  bool
		deadline time.Duration
	}{
		{name: "answering", fn: answering(timeout/10, 1<<30, -1), deadline: 3 * timeout},
		{name: "silent", fn: answering(timeout/10, 0, -1), deadline: timeout / 2, failure: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []error
			r, err := NewRunner(RunnerOptions{Connector: "c", Sink: sinktest.NewMemory(), SinkTimeout: timeout, GiveUpAfter: time.Minute,
				CircuitBreaker: CircuitBreakerSpec{ProbeInterval: time.Hour},
				sinkCalled: func(err error) {
					if err != nil {
						reported = append(reported, err)
					}
				}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), tc.deadline)
			defer cancel()
			_, _, err = claimWriter(r, openingSink{Sink: sinktest.NewMemory(), fn: tc.fn})(ctx, "0")
			if err == nil {
				t.Fatal("the claim succeeded past its budget")
			}
			if got := errors.Is(err, ErrSinkTimeout); got != tc.failure {
				t.Errorf("claim error %v: ErrSinkTimeout %v, want %v", err, got, tc.failure)
			}
			if open := !r.brk.isClosed(); open != tc.failure {
				t.Errorf("breaker open: %v, want %v", open, tc.failure)
			}
			if got := len(reported) > 0; got != tc.failure {
				t.Errorf("readiness told of %v, want a failure: %v", reported, tc.failure)
			}
		})
	}
}
