package connector

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	const timeout = 40 * time.Millisecond
	errLease := fmt.Errorf("%w: the lease runs out", ErrOwnershipLost)
	for _, tc := range []struct {
		name    string
		fn      func(context.Context) error
		lease   func(start time.Time) func() error
		want    error // nil: success
		message string
		opened  bool
	}{
		{name: "answers slowly", fn: answering(timeout/4, 20, 20)},
		{name: "answers stop", fn: answering(timeout/4, 12, -1), want: ErrSinkTimeout, message: "no answer within", opened: true},
		{name: "silent from the start", fn: answering(timeout/4, 0, -1), want: ErrSinkTimeout, message: "no answer within", opened: true},
		{name: "answers without end", fn: answering(timeout/4, 1<<30, -1), want: ErrSinkTimeout, message: "although its destination answered", opened: true},
		{name: "lease runs out in a slow commit", fn: answering(timeout/4, 1<<30, -1), want: ErrOwnershipLost,
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
