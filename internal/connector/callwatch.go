package connector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// errors.sink_timeout tells a sink that does not answer from one that
// answers slowly. A call is cut when its destination has been silent for
// SinkTimeout (no byte moved on the call's connections, as the sink
// reports with sinks.Progress; a sink that reports nothing is silent from
// the call's start, as under a fixed deadline), not when the call has
// lasted SinkTimeout: a PostgreSQL 300 ms away per direction takes more
// than a 2.5 s sink_timeout for a flush of several round trips, each of
// them answered. What an answering call may take is bounded twice:
//
//   - by callBound from its start, so that a destination that trickles
//     bytes without ever finishing fails as one that is silent;
//   - for a commit, by the partition's lease: past SinkTimeout it goes on
//     only while the lease has the margin checkLease asks of a commit
//     that starts, so a commit that was slow never lands after the lease
//     can have run out (the store not renewing it), as a commit cut at
//     SinkTimeout never did.

// errSilent and errCallTooLong are the causes of a call's end that the
// runner decided (see callSink).
var (
	errSilent      = errors.New("the sink's destination did not answer")
	errCallTooLong = errors.New("the sink call ran past its bound")
)

// errStillAnswering is matched by the error of a call whose caller's own
// deadline (a claim's budget, a drain's) ended it while its destination
// was answering: the caller's bound was too short for a slow sink, which
// says nothing of the sink's health.
var errStillAnswering = errors.New("its destination was still answering")

// callGuard is what a sink call answers to besides the sink timeout.
type callGuard struct {
	// beat (nil: none) tells the source's watchdog that the partition is
	// alive: while the call waits on the breaker or a backoff, and while
	// its destination answers.
	beat func()
	// lease (nil: none) returns an error matching ErrOwnershipLost when a
	// commit may no longer land (checkLease); checked while the call runs
	// past SinkTimeout (the call checks it itself before it starts).
	lease func() error
}

// callBound is the most one sink call may take while its destination
// keeps answering: twice the ownership expiration (GiveUpAfter), the
// longest a partition may go unread, which a call that runs longer
// breaks by itself; eight sink timeouts for a runner without one. Never
// less than SinkTimeout. (One ownership expiration is too short: a
// PostgreSQL flush over a path 1 s away each way was still copying when
// cut at 10 s, TestSlowPostgresAtDefaults.)
func (r *Runner) callBound() time.Duration {
	if r.opts.GiveUpAfter > 0 {
		return max(2*r.opts.GiveUpAfter, r.opts.SinkTimeout)
	}
	return 8 * r.opts.SinkTimeout
}

// callWatch ends one sink call's context when its destination has been
// silent for timeout, or when lease fails once the call is past timeout;
// callBound is its context's deadline. Its timer runs at the next
// instant either can happen (and every beatEvery when it beats, every
// quarter SinkTimeout when it checks a lease).
type callWatch struct {
	ctx     context.Context // the call's
	cancel  context.CancelCauseFunc
	release context.CancelFunc // the deadline's
	expired *atomic.Bool       // the watch ended ctx (its Err is then DeadlineExceeded)

	start    time.Time
	timeout  time.Duration
	guard    callGuard
	last     atomic.Int64 // UnixNano of the last progress the sink reported
	moved    atomic.Bool  // progress since the last beat
	answered atomic.Bool  // progress at all

	mu      sync.Mutex // guards t and stopped
	t       *time.Timer
	stopped bool
}

// watchCall starts the watch of a call under ctx; the caller must stop it.
func (r *Runner) watchCall(ctx context.Context, g callGuard) *callWatch {
	w := &callWatch{start: time.Now(), timeout: r.opts.SinkTimeout, guard: g, expired: new(atomic.Bool)}
	w.last.Store(w.start.UnixNano())
	dctx, release := context.WithDeadlineCause(ctx, w.start.Add(r.callBound()), errCallTooLong)
	cctx, cancel := context.WithCancelCause(dctx)
	w.release, w.cancel = release, cancel
	w.ctx = sinks.WithProgress(expiringCtx{cctx, w.expired}, w.progress)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = time.AfterFunc(w.next(w.start), w.check)
	return w
}

func (w *callWatch) progress() {
	w.last.Store(time.Now().UnixNano())
	w.moved.Store(true)
	w.answered.Store(true)
}

// answering reports whether the destination answered within the last
// sink timeout.
func (w *callWatch) answering() bool {
	return w.answered.Load() && time.Since(time.Unix(0, w.last.Load())) < w.timeout
}

// next is how long from now until the watch must look again.
func (w *callWatch) next(now time.Time) time.Duration {
	d := time.Unix(0, w.last.Load()).Add(w.timeout).Sub(now)
	if w.guard.beat != nil {
		d = min(d, beatEvery)
	}
	if w.guard.lease != nil {
		// checkLease's margin is at most SinkTimeout (and is SinkTimeout
		// at the defaults): a check every quarter of it cuts a commit
		// with most of the margin left.
		d = min(d, w.timeout/4)
	}
	return max(d, time.Millisecond)
}

func (w *callWatch) check() {
	now := time.Now()
	if w.guard.beat != nil && w.moved.Swap(false) {
		w.guard.beat()
	}
	var cause error
	if now.Sub(time.Unix(0, w.last.Load())) >= w.timeout {
		cause = errSilent
	} else if w.guard.lease != nil && now.Sub(w.start) >= w.timeout {
		cause = w.guard.lease()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	if cause != nil {
		w.expired.Store(true)
		w.cancel(cause)
		return
	}
	w.t.Reset(w.next(now))
}

// stop ends the watch and the call's context.
func (w *callWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
	w.cancel(nil)
	w.release()
}

// err turns the error of a call that failed while its parent context was
// alive into what the runner makes of it: the watch's verdict, when it
// ended the call, or a deadline of the sink's own, which is as telling.
func (w *callWatch) err(err error) error {
	switch cause := context.Cause(w.ctx); {
	case errors.Is(cause, ErrOwnershipLost):
		return fmt.Errorf("%w (the call had run %s, its destination still answering): %w", cause, time.Since(w.start).Round(time.Millisecond), err)
	case errors.Is(cause, errSilent):
		return sinks.Transient(fmt.Errorf("%w: no answer within %s (errors.sink_timeout): %w", ErrSinkTimeout, w.timeout, err))
	case errors.Is(cause, errCallTooLong):
		return sinks.Transient(fmt.Errorf("%w: not done after %s although its destination answered (the bound of one call): %w",
			ErrSinkTimeout, time.Since(w.start).Round(time.Millisecond), err))
	case errors.Is(err, context.DeadlineExceeded):
		// A bound of the sink's own ran out first (a connect timeout
		// over a path that accepts connections and answers nothing):
		// no answer either, and as telling as the sink timeout.
		return sinks.Transient(fmt.Errorf("%w: no answer within the sink's own bound: %w", ErrSinkTimeout, err))
	}
	return err
}

// expiringCtx is a call's context that its watch may end as a deadline
// would: Err then says context.DeadlineExceeded rather than
// context.Canceled, so that a sink (and what it derives from the context)
// sees the timeout it saw when sink_timeout was a fixed deadline.
type expiringCtx struct {
	context.Context
	expired *atomic.Bool
}

func (c expiringCtx) Err() error {
	err := c.Context.Err()
	if errors.Is(err, context.Canceled) && c.expired.Load() {
		return context.DeadlineExceeded
	}
	return err
}
