package connector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/sinks"
)

// retry runs fn until it succeeds, fails with an error not marked
// transient, ctx ends, or MaxAttempts is reached, waiting a capped
// exponential backoff with full jitter between attempts. Each attempt is
// one callSink under g.
//
// g.beat (nil: none) is called while it waits, so that the source's
// watchdog sees a partition that retries as alive.
func (r *Runner) retry(ctx context.Context, what string, g callGuard, fn func(context.Context) error) error {
	beat := g.beat
	waits := backoff.Backoff{Initial: r.opts.Retry.InitialBackoff, Max: r.opts.Retry.MaxBackoff}
	since := time.Now()
	var last error
	for attempt := 1; ; attempt++ {
		// A Write may only buffer, so its success proves nothing about the
		// sink: it waits out an open breaker but never takes the probe.
		var werr error
		if what == opWrite {
			werr = r.brk.waitReceive(ctx, since, r.opts.GiveUpAfter, beat)
		} else {
			werr = r.brk.acquire(ctx, since, r.opts.GiveUpAfter, beat)
		}
		if errors.Is(werr, ErrSinkUnavailable) {
			return werr
		}
		if werr != nil {
			if last == nil {
				last = r.brk.lastError()
			}
			return fmt.Errorf("%w while the circuit breaker was open (last sink error: %w)", werr, last)
		}
		err := r.callSink(ctx, g, fn)
		if errors.Is(err, ErrOwnershipLost) {
			// refused before the sink was called (checkLease), or a slow
			// commit cut before the lease could run out
			r.brk.calledOff()
			return err
		}
		last = err
		if what != opWrite || err != nil {
			r.brk.result(err)
			r.sinkCalled(ctx, err)
		}
		if err == nil || !sinks.IsTransient(err) {
			return err
		}
		if r.opts.Retry.MaxAttempts > 0 && attempt >= r.opts.Retry.MaxAttempts {
			return fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		r.opts.Metrics.retried(r.opts.Connector, what)
		wait := waits.Jittered()
		r.log.Warn("transient failure; retrying", "op", what, "attempt", attempt, "wait", wait, "error", err)
		if !sleepOrChange(ctx, wait, nil, beat) {
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		}
	}
}

// callSink runs fn, one sink call, under SinkTimeout as callWatch applies
// it: the call fails once its destination has been silent that long, not
// once it has lasted that long. A call the runner ended while ctx (the
// partition's) is alive is the sink's failure, not a cancellation: it
// comes back marked transient and matching ErrSinkTimeout, so that it is
// retried and counts for the breaker and readiness; a commit cut for its
// lease comes back matching ErrOwnershipLost. The sink cannot tell these
// apart from a cancellation (its context just ends); the runner, which
// ended it, can.
func (r *Runner) callSink(ctx context.Context, g callGuard, fn func(context.Context) error) error {
	if r.opts.SinkTimeout <= 0 {
		return fn(ctx)
	}
	w := r.watchCall(ctx, g)
	defer w.stop()
	err := fn(w.ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && w.answering() {
			return fmt.Errorf("%w when its caller's deadline ended it: %w", errStillAnswering, err)
		}
		return err
	}
	return w.err(err)
}

// opWrite names the sink's Write in retries and metrics.
const opWrite = "write"

// sinkCalled passes the outcome of a sink call to opts.sinkCalled: a
// call that returned, or failed on the sink's side. A rejected event is
// the event's fault, and a cancelled call says nothing of the sink.
func (r *Runner) sinkCalled(ctx context.Context, err error) {
	if r.opts.sinkCalled == nil || ctx.Err() != nil {
		return
	}
	var be *sinks.BatchError
	if errors.As(err, &be) || errors.Is(err, sinks.ErrFenced) {
		err = nil
	}
	r.opts.sinkCalled(err)
}

func (s RetrySpec) withDefaults() RetrySpec {
	if s.InitialBackoff == 0 {
		s.InitialBackoff = 200 * time.Millisecond
	}
	if s.MaxBackoff == 0 {
		s.MaxBackoff = 30 * time.Second
	}
	if s.MaxBackoff < s.InitialBackoff {
		s.MaxBackoff = s.InitialBackoff
	}
	return s
}
