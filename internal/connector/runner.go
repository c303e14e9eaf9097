package connector

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/backoff"
	"log/slog"
	"sync"
	"time"

	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// ErrOwnershipLost is matched (errors.Is) by a partition's Receive or
// Checkpoint when another owner took the partition. The runner then
// abandons what it has not flushed and stops without checkpointing: the new
// owner resumes from the sink's watermark. It is the source's sentinel, so
// that the source's partitions report it as they are.
var ErrOwnershipLost = source.ErrOwnershipLost

// ErrSinkUnavailable is matched (errors.Is) by the error of a partition the
// runner stopped because the connector's circuit breaker stayed open for
// longer than GiveUpAfter: what it had not flushed is abandoned (the next
// owner replays it from the sink's watermark), so that the partition can
// go to a replica whose sink answers.
var ErrSinkUnavailable = errors.New("sink unavailable")

// ErrSinkTimeout is matched (errors.Is) by the error of a sink call that
// did not return within RunnerOptions.SinkTimeout: the sink stopped
// answering (a half-open connection, a stuck server). Such an error is
// marked transient (sinks.IsTransient).
var ErrSinkTimeout = errors.New("sink call timed out")

// ErrDrainIncomplete is matched (errors.Is) by the error of a partition
// whose drain did not finish: what it held was not committed, or its final
// checkpoint was not written, within the drain timeout. Nothing is lost (the
// next owner replays from the sink's watermark), but the stop was not clean.
var ErrDrainIncomplete = errors.New("drain incomplete")

// Partition is one owned partition as the runner drives it. The source
// package provides it; tests use an in-memory one. The runner calls
// Receive from one goroutine and Checkpoint from another, at the same
// time: the next batch is received while the previous one is committed.
type Partition interface {
	// ID is the partition ID.
	ID() string
	// Receive returns the next batch, possibly empty after the batch wait.
	// It returns an error matching ErrOwnershipLost when the partition was
	// taken by another owner, and ctx.Err() once ctx is done.
	Receive(ctx context.Context) ([]sinks.Event, error)
	// Checkpoint records pos as the partition's checkpoint.
	Checkpoint(ctx context.Context, pos sinks.Position) error
}

// writerTaker is implemented by a Partition whose claim opened the sink's
// writer already (the source's, through claimWriter): the runner runs the
// partition with that writer, whose watermark decided where the partition
// resumes, instead of opening a second one.
type writerTaker interface {
	TakeWriter() (sinks.Writer, *sinks.Position, bool)
}

// storedCheckpointer is implemented by a Partition that knows the
// checkpoint stored when it was claimed (the source's partitions do).
// StoredCheckpoint returns its sequence number, -1 when none was stored,
// and false when it is not known. The runner then checkpoints a sink
// watermark found past it at open, without waiting for new events.
type storedCheckpointer interface {
	StoredCheckpoint() (seq int64, ok bool)
}

// leaseHolder is implemented by a Partition that knows when its ownership
// lease runs out unless renewed (the source's). The runner starts no
// commit that could end after it: past that instant another replica may
// own the partition, and the fence, not the lease, would be all that
// keeps the two apart.
type leaseHolder interface {
	LeaseExpiry() (at time.Time, ok bool)
}

// RunnerOptions configure a Runner. The zero value of every field but Sink
// has a documented default.
type RunnerOptions struct {
	// Connector names the connector in errors and logs.
	Connector string
	// Sink is the sink the partitions are written to. Required.
	Sink sinks.Sink
	// Tolerance is "none" (an event the sink rejects stops the partition
	// with an error) or "all" (it is dead-lettered). If empty, "all".
	Tolerance string
	// Filter drops events before the sink (see FilterSpec). If nil, every
	// event is written.
	Filter *FilterSpec
	// Format is the format of the events the sink reads (see
	// [ChangeEvents]): with debezium, the filter lets tombstones through.
	// If empty, json.
	Format cdc.Format
	// DeadLetters stores dead letters for writers that do not store them
	// themselves. If nil, dead letters of such writers stop the partition
	// with an error, as with Tolerance "none".
	DeadLetters DeadLetterStore
	// Retry bounds retries of transient sink failures.
	Retry RetrySpec
	// CircuitBreaker stops every partition from receiving after repeated
	// transient sink failures. Zero fields take their defaults.
	CircuitBreaker CircuitBreakerSpec
	// GiveUpAfter, if not zero, stops a partition with ErrSinkUnavailable
	// once the circuit breaker has been open that long while the partition
	// waits on it, so that the partition's lease can go to a replica whose
	// sink answers. The connector sets it to the ownership expiration.
	GiveUpAfter time.Duration
	// CheckpointEveryEvents and CheckpointEveryInterval space checkpoints
	// out; if both are zero, every flush is checkpointed. A partition that
	// stops cleanly, or receives an empty batch (it went quiet), always
	// checkpoints what it committed. A failed checkpoint is retried after
	// a backoff of Retry's bounds, whatever the policy.
	CheckpointEveryEvents int
	// CheckpointEveryInterval: see CheckpointEveryEvents.
	CheckpointEveryInterval time.Duration
	// DrainTimeout bounds the final flush and checkpoint after ctx is
	// cancelled. If zero, 30s.
	DrainTimeout time.Duration
	// SinkTimeout, if not zero, bounds each sink call (Open, Write, Flush,
	// DeadLetter). A call that runs out of it (not out of the partition's
	// own ctx) fails with an error matching ErrSinkTimeout, marked
	// transient: it is retried, counted by the circuit breaker and passed
	// to readiness like any other transient sink failure.
	SinkTimeout time.Duration
	// Logger receives the runner's logs; give it the connector's name as an
	// attribute. If nil, logs are discarded.
	Logger *slog.Logger
	// Metrics records the runner's metrics. If nil, none.
	Metrics *Metrics
	// now is the clock; tests replace it.
	now func() time.Time
	// pause, when set, is the connector's pause switch (see Control).
	pause *gate
	// sinkCalled, when set, receives the outcome of every sink call, so
	// that readiness follows the sink.
	sinkCalled func(error)
	// storeCalled, when set, receives the outcome of every checkpoint
	// call that was not cut short by the partition's ctx or refused for a
	// lost ownership, so that readiness follows the checkpoint store.
	storeCalled func(error)
}

// DeadLetterStore keeps dead letters durably. Store must have made the
// letters durable when it returns nil. Implementations must be safe for
// concurrent use by the partitions of a connector.
type DeadLetterStore interface {
	// Store makes the dead letters of one partition durable.
	Store(ctx context.Context, partition string, letters []sinks.DeadLetter) error
}

// Runner moves events of owned partitions through dedupe, the sink and the
// checkpoint, in that order. It is safe for concurrent use: RunPartition is
// called once per owned partition, each in its own goroutine.
type Runner struct {
	opts RunnerOptions
	log  *slog.Logger

	brk *breaker

	mu     sync.Mutex // guards active
	active map[string]*partitionRun
}

// NewRunner returns a runner. It starts nothing.
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.Sink == nil {
		return nil, errors.New("connector: RunnerOptions.Sink is required")
	}
	if opts.Tolerance == "" {
		opts.Tolerance = "all"
	}
	if opts.Tolerance != "all" && opts.Tolerance != "none" {
		return nil, fmt.Errorf("connector: unknown tolerance %q", opts.Tolerance)
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 30 * time.Second
	}
	opts.Retry = opts.Retry.withDefaults()
	if opts.now == nil {
		opts.now = time.Now
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{opts: opts, log: log, brk: newBreaker(opts.CircuitBreaker, opts.Connector, log, opts.Metrics), active: make(map[string]*partitionRun)}, nil
}

// Watermark returns the committed watermark of a partition this runner is
// driving right now, and false when it drives no such partition. Asking a
// sink instead would open a second writer beside the running one, which a
// sink may take for a crashed predecessor and clean up after.
func (r *Runner) Watermark(partition string) (*sinks.Position, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pr, ok := r.active[partition]
	if !ok {
		return nil, false
	}
	return pr.committed(), true
}

// partitionRun is the state of one RunPartition call. Its fields are used
// by the RunPartition goroutine alone, except watermark and stat, which
// Watermark and snapshot read under wmMu.
type partitionRun struct {
	r    *Runner
	wmMu sync.Mutex // guards watermark and stat against Runner.Watermark and Runner.snapshot
	p    sinks.Writer
	src  Partition
	beat func() // the partition's heartbeat, or nil
	log  *slog.Logger
	met  *partitionMetrics

	// recvWaitSince is when the receiving goroutine (mayReceive, its only
	// user) first found the breaker not closed in this outage.
	recvWaitSince time.Time

	watermark     *sinks.Position // what the sink has committed
	written       bool            // events written since the last flush
	unflushed     int             // how many events were written since the last flush
	lastWritten   sinks.Position  // the last event handed to Write
	ckptErr       error           // why the last checkpoint failed, if it did
	ckptBackoff   backoff.Backoff // waits before the next attempt after ckptErr
	ckptRetryAt   time.Time       // when a failed checkpoint is tried again
	checkpointed  *sinks.Position // last checkpoint written by this run
	sinceCkpt     int             // events committed since that checkpoint
	lastCkptAt    time.Time
	committedNext *sinks.Position // committed, waiting for the checkpoint policy
	lastEnqueued  time.Time       // enqueued time of the last event handed to Write
	kept          []sinks.Event   // scratch: the events of a batch the filter keeps
	// dropTail is the last event the filter dropped (or dead-lettered
	// through the runner's store), when it comes after every event handed
	// to the writer: the watermark moves to it once the writer holds
	// nothing unflushed. dropN counts those events for the checkpoint policy.
	dropTail *sinks.Position
	dropN    int
	stat     partitionStat // for the status snapshot
}

// partitionStat is what a status snapshot reads of a partition run.
type partitionStat struct {
	checkpoint *int64    // last checkpoint written
	received   *int64    // highest sequence number received
	enqueued   time.Time // enqueued time of the last committed event
	committed  int64     // events committed
	lastCommit time.Time
	paused     bool
}

// RunPartition drives one partition until ctx is cancelled (then it drains:
// the batch in hand is flushed and checkpointed within DrainTimeout, and it
// returns nil), the partition is lost (nil; nothing more is checkpointed),
// or a permanent failure (an error naming the connector and partition).
func (r *Runner) RunPartition(ctx context.Context, src Partition) (err error) {
	log := r.log.With("partition", src.ID())
	w, wm, err := r.openWriter(ctx, src)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return r.errorf(src, "open sink: %w", err)
	}
	pr := r.newPartitionRun(src, w, wm, log)
	defer pr.met.release()
	r.mu.Lock()
	r.active[src.ID()] = pr
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.active[src.ID()] == pr {
			delete(r.active, src.ID())
		}
		r.mu.Unlock()
	}()
	if pr.behindWatermark(wm) {
		// The sink committed past the stored checkpoint (a checkpoint that
		// failed, or a process stopped between a commit and its
		// checkpoint). Checkpoint it now: a partition that receives nothing
		// more would otherwise keep its checkpoint, and its reported lag,
		// behind for as long as it stays quiet.
		pr.committedNext = wm
	}
	log.Debug("partition opened", "watermark", posAttr(wm))
	defer func() {
		if cerr := w.Close(context.WithoutCancel(ctx)); cerr != nil && err == nil {
			err = r.errorf(src, "close sink writer: %w", cerr)
		}
	}()
	batches, stopReceiving := receiveAhead(ctx, src, pr.mayReceive)
	defer stopReceiving()
	return pr.consume(ctx, batches)
}

// newPartitionRun builds the state of one RunPartition call around the
// writer the sink opened at watermark wm. It reads the checkpoint found at
// the claim so the status shows it from the start, not only once this run
// writes its own.
func (r *Runner) newPartitionRun(src Partition, w sinks.Writer, wm *sinks.Position, log *slog.Logger) *partitionRun {
	pr := &partitionRun{r: r, p: w, src: src, beat: heartbeat(src), log: log, watermark: wm, lastCkptAt: r.opts.now(),
		ckptBackoff: backoff.Backoff{Initial: r.opts.Retry.InitialBackoff, Max: r.opts.Retry.MaxBackoff},
		met:         r.opts.Metrics.forPartition(r.opts.Connector, src.ID())}
	if sc, ok := src.(storedCheckpointer); ok {
		// The checkpoint found at the claim, whoever wrote it (an earlier
		// process, another replica): the status shows it until this run
		// writes its own.
		if seq, known := sc.StoredCheckpoint(); known && seq >= 0 {
			pr.stat.checkpoint = &seq
		}
	}
	return pr
}

// consume is RunPartition's loop: it holds while the connector is paused,
// takes the batches the receiving goroutine hands over, and hands each to
// handle, until the partition is drained, lost or fails. It is its own
// step so RunPartition reads as open, register, consume, close; what
// RunPartition returns is what consume returns.
func (pr *partitionRun) consume(ctx context.Context, batches <-chan received) error {
	r, src, log := pr.r, pr.src, pr.log
	for {
		paused, changed := r.opts.pause.state()
		if paused {
			if err := pr.hold(ctx, changed); err != nil {
				if errors.Is(err, errPartitionGone) {
					return nil
				}
				return err
			}
			if ctx.Err() != nil {
				return nil // hold drained it
			}
			continue
		}
		var (
			b  received
			ok bool
		)
		select {
		case b, ok = <-batches:
		case <-changed:
			continue // paused meanwhile: hold before taking more
		}
		events, rerr := b.events, b.err
		switch {
		case errors.Is(rerr, ErrSinkUnavailable):
			return pr.giveUp(rerr)
		case ctx.Err() != nil || !ok:
			return pr.drain(ctx, events)
		case errors.Is(rerr, ErrOwnershipLost):
			log.Info("partition lost; abandoning what was not flushed", "watermark", posAttr(pr.watermark))
			return nil
		case rerr != nil:
			return r.errorf(src, "receive: %w", rerr)
		}
		if err := pr.handle(ctx, events); err != nil {
			return pr.handleFailed(ctx, err)
		}
	}
}

// handleFailed decides what a failed handle means for the partition: give
// it up while the sink is unavailable, let it go when another writer
// fenced it or its lease runs out, drain it when ctx was cancelled
// meanwhile, and otherwise fail with err. Its value is what RunPartition
// returns.
func (pr *partitionRun) handleFailed(ctx context.Context, err error) error {
	log := pr.log
	if errors.Is(err, ErrSinkUnavailable) && ctx.Err() == nil {
		return pr.giveUp(err)
	}
	if errors.Is(err, sinks.ErrFenced) {
		log.Warn("another writer committed this partition; giving it up", "error", err)
		return nil
	}
	if errors.Is(err, ErrOwnershipLost) && ctx.Err() == nil {
		// checkLease: the lease was not renewed in time
		log.Warn("partition's lease runs out; abandoning what was not flushed", "unflushed", pr.unflushed, "error", err)
		return err
	}
	if ctx.Err() != nil {
		return pr.drain(ctx, nil)
	}
	return err
}

// mayReceive waits while the circuit breaker is open or the connector is
// paused. It returns ctx.Err() when ctx ended first, and an error matching
// ErrSinkUnavailable when the breaker stayed open past GiveUpAfter.
func (pr *partitionRun) mayReceive(ctx context.Context) error {
	for {
		// The give-up clock runs from the first wait of this outage: a
		// partition that receives nothing goes through here again after
		// every open period and would otherwise never reach GiveUpAfter,
		// holding its lease on a replica whose sink is down.
		if pr.recvWaitSince.IsZero() || pr.r.brk.isClosed() {
			pr.recvWaitSince = time.Now()
		}
		if err := pr.r.brk.waitReceive(ctx, pr.recvWaitSince, pr.r.opts.GiveUpAfter, pr.beat); err != nil {
			return err
		}
		paused, changed := pr.r.opts.pause.state()
		if !paused {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// received is the result of one Receive.
type received struct {
	events []sinks.Event
	err    error
}

// receiveAhead calls src.Receive in a goroutine of its own and hands each
// result over an unbuffered channel, so that the next batch is received
// while the partition's goroutine writes, flushes and checkpoints the
// previous one. At most one received batch waits besides the one in hand:
// memory stays set by the batch size. The goroutine stops after handing
// over an error, or when ctx ends (the channel is then closed). ready is
// called before each Receive and may wait; its error is handed over as a
// Receive's. stop cancels the goroutine and returns once it has stopped.
func receiveAhead(ctx context.Context, src Partition, ready func(context.Context) error) (batches <-chan received, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	out := make(chan received)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(out)
		for {
			var events []sinks.Event
			err := ready(ctx)
			if err == nil {
				events, err = src.Receive(ctx)
			}
			select {
			case out <- received{events: events, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	return out, func() { cancel(); wg.Wait() }
}

func (r *Runner) errorf(src Partition, format string, args ...any) error {
	return fmt.Errorf("connector %q partition %s: %w", r.opts.Connector, src.ID(), fmt.Errorf(format, args...))
}

func (r *Runner) openWriter(ctx context.Context, src Partition) (w sinks.Writer, wm *sinks.Position, err error) {
	if t, ok := src.(writerTaker); ok {
		if w, wm, ok := t.TakeWriter(); ok {
			return w, wm, nil
		}
	}
	err = r.retry(ctx, "open sink", heartbeat(src), func(ctx context.Context) error {
		w, wm, err = r.opts.Sink.Open(ctx, src.ID())
		return err
	})
	return w, wm, err
}

// errPartitionGone is hold's report of a partition another owner took.
var errPartitionGone = errors.New("partition taken by another owner")

// hold keeps a paused partition: what was written is flushed and the
// committed watermark checkpointed (whatever the checkpoint policy), then
// it waits, heartbeating, for resumed (closed when the pause switch
// changes) or ctx. It returns the drain's result when ctx ends first.
func (pr *partitionRun) hold(ctx context.Context, resumed <-chan struct{}) error {
	var err error
	if pr.written {
		err = pr.flush(ctx)
	}
	if err == nil {
		err = pr.checkpoint(ctx)
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return pr.drain(ctx, nil)
	case errors.Is(err, sinks.ErrFenced), errors.Is(err, ErrOwnershipLost):
		pr.log.Info("partition lost while pausing; abandoning what was not flushed", "error", err)
		return errPartitionGone
	default:
		return err
	}
	pr.setPaused(true)
	defer pr.setPaused(false)
	pr.log.Info("partition paused", "watermark", posAttr(pr.watermark))
	tick := time.NewTicker(beatEvery)
	defer tick.Stop()
	for {
		if pr.beat != nil {
			pr.beat()
		}
		select {
		case <-ctx.Done():
			return pr.drain(ctx, nil)
		case <-resumed:
			pr.log.Info("partition resumed")
			return nil
		case <-tick.C:
		}
	}
}

func (pr *partitionRun) setPaused(p bool) {
	pr.wmMu.Lock()
	defer pr.wmMu.Unlock()
	pr.stat.paused = p
}

// handle takes one batch through dedupe, the sink, and the checkpoint.
func (pr *partitionRun) handle(ctx context.Context, events []sinks.Event) error {
	n := len(events)
	if n > 0 {
		seq := events[n-1].SequenceNumber
		pr.wmMu.Lock()
		pr.stat.received = &seq
		pr.wmMu.Unlock()
	}
	if err := pr.take(ctx, events); err != nil {
		return err
	}
	if pr.flushDue() {
		if err := pr.flush(ctx); err != nil {
			return err
		}
	}
	// Checked on idle batches too, so that the last commit of a partition
	// that went quiet is checkpointed, and a failed checkpoint retried.
	if pr.checkpointDue(n == 0) {
		return pr.checkpoint(ctx)
	}
	return nil
}

// take hands the events of a batch the sink does not hold yet to the
// writer, less those the filter drops.
func (pr *partitionRun) take(ctx context.Context, events []sinks.Event) error {
	n := len(events)
	events = dedupe.After(events, pr.watermark)
	pr.met.skippedEvents(n - len(events))
	if len(events) == 0 {
		return nil
	}
	f := pr.r.opts.Filter
	if f == nil {
		return pr.write(ctx, events)
	}
	kept := pr.kept[:0]
	defer func() { clear(kept); pr.kept = kept[:0] }() // do not keep the bodies alive
	var (
		failed  []sinks.RejectedEvent
		tail    sinks.Position
		hasTail bool
		dropped int
	)
	for i := range events {
		ev := &events[i]
		ok, err := f.Keeps(ev, pr.r.opts.Format)
		switch {
		case err != nil:
			failed = append(failed, sinks.RejectedEvent{Event: *ev, Err: err})
			tail, hasTail = ev.Position(), true
		case ok:
			kept = append(kept, *ev)
			hasTail = false
		default:
			dropped++
			tail, hasTail = ev.Position(), true
		}
	}
	pr.met.filtered(dropped)
	if len(kept) > 0 {
		if err := pr.write(ctx, kept); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		// A writer that stores dead letters commits them with its next
		// flush; the runner's store has them durable on return.
		if _, ok := pr.p.(sinks.DeadLetterer); ok {
			pr.written = true
		}
		if err := pr.deadLetter(ctx, failed); err != nil {
			return err
		}
	}
	switch {
	case hasTail:
		pr.dropTail = &tail
	case len(kept) > 0:
		pr.dropTail = nil // what the writer now holds comes after it
	}
	pr.dropN += dropped + len(failed)
	if !pr.written {
		pr.advanceDropped()
	}
	return nil
}

// advanceDropped moves the committed watermark to the last dropped event,
// which nothing unflushed precedes (the writer holds nothing, or has just
// committed everything it held).
func (pr *partitionRun) advanceDropped() {
	t := pr.dropTail
	if t == nil {
		return
	}
	pr.dropTail = nil
	pr.sinceCkpt += pr.dropN
	pr.dropN = 0
	pr.wmMu.Lock()
	defer pr.wmMu.Unlock()
	if pr.watermark != nil && t.SequenceNumber <= pr.watermark.SequenceNumber {
		return
	}
	pr.watermark, pr.committedNext = t, t
}

func (pr *partitionRun) write(ctx context.Context, events []sinks.Event) error {
	r := pr.r
	err := r.retry(ctx, opWrite, pr.beat, func(ctx context.Context) error {
		return pr.p.Write(ctx, events)
	})
	pr.written = true
	pr.unflushed += len(events)
	pr.lastWritten = events[len(events)-1].Position()
	pr.lastEnqueued = events[len(events)-1].EnqueuedTime
	var be *sinks.BatchError
	if errors.As(err, &be) && len(be.Failed) == 0 {
		err = nil // a BatchError that names no event rejects none
	}
	if err == nil || !errors.As(err, &be) {
		if err != nil {
			return r.errorf(pr.src, "write seq %d-%d: %w", events[0].SequenceNumber, events[len(events)-1].SequenceNumber, err)
		}
		return nil
	}
	rejected := make([]sinks.RejectedEvent, len(be.Failed))
	for i, f := range be.Failed {
		rejected[i] = sinks.RejectedEvent{Event: events[f.Index], Err: f.Err}
	}
	return pr.deadLetter(ctx, rejected)
}

// deadLetter applies errors.tolerance to events the sink rejected, in Write
// or at commit: they are stored as dead letters (by the writer, committed by
// its next Flush with the data, or by the runner's store before that
// Flush), or the partition stops.
func (pr *partitionRun) deadLetter(ctx context.Context, rejected []sinks.RejectedEvent) error {
	r := pr.r
	first := rejected[0]
	if r.opts.Tolerance == "none" {
		return r.errorf(pr.src, "event seq %d rejected by the sink: %w (errors.tolerance is none)", first.Event.SequenceNumber, first.Err)
	}
	now := r.opts.now()
	letters := make([]sinks.DeadLetter, len(rejected))
	for i, rj := range rejected {
		letters[i] = sinks.DeadLetter{Event: rj.Event, Reason: rj.Err.Error(), FailedAt: now}
		pr.log.Warn("event dead-lettered", "seq", rj.Event.SequenceNumber, "reason", rj.Err)
	}
	pr.met.deadLettered(len(letters))
	var err error
	if dl, ok := pr.p.(sinks.DeadLetterer); ok {
		err = r.retry(ctx, "dead-letter", pr.beat, func(ctx context.Context) error { return dl.DeadLetter(ctx, letters) })
	} else if r.opts.DeadLetters != nil {
		err = r.retry(ctx, "dead-letter", pr.beat, func(ctx context.Context) error {
			return r.opts.DeadLetters.Store(ctx, pr.src.ID(), letters)
		})
	} else {
		return r.errorf(pr.src, "event seq %d rejected by the sink and no dead-letter path: %w", first.Event.SequenceNumber, first.Err)
	}
	if err != nil {
		return r.errorf(pr.src, "store dead letters for seq %d: %w", first.Event.SequenceNumber, err)
	}
	return nil
}

// committed returns a copy of the committed watermark, for other goroutines.
func (pr *partitionRun) committed() *sinks.Position {
	pr.wmMu.Lock()
	defer pr.wmMu.Unlock()
	if pr.watermark == nil {
		return nil
	}
	c := *pr.watermark
	return &c
}

func (pr *partitionRun) flushDue() bool {
	if !pr.written {
		// Idle batches still give a Batcher the chance to roll on age.
		return false
	}
	if b, ok := pr.p.(sinks.Batcher); ok {
		return b.FlushDue(pr.r.opts.now())
	}
	return true
}

func (pr *partitionRun) flush(ctx context.Context) error {
	r := pr.r
	var wm *sinks.Position
	start := time.Now()
	// A flush that meets events the destination refuses commits nothing
	// and reports them; once they are dead-lettered, the next round commits
	// the rest with them. Each round takes at least one event out, so the
	// rounds are bounded by what was written.
	for round := 0; ; round++ {
		err := r.retry(ctx, "flush", pr.beat, func(ctx context.Context) error {
			if err := pr.checkLease(); err != nil {
				return err
			}
			var err error
			wm, err = pr.p.Flush(ctx)
			return err
		})
		var rej *sinks.RejectedError
		if err != nil && errors.As(err, &rej) && len(rej.Rejected) > 0 && round <= pr.unflushed {
			if err := pr.deadLetter(ctx, rej.Rejected); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return r.errorf(pr.src, "flush: %w", err)
		}
		break
	}
	pr.written = false
	if wm != nil && wm.Offset == "" && wm.SequenceNumber == pr.lastWritten.SequenceNumber {
		// A sink may keep only sequence numbers; checkpoint stores need
		// the offset too, and the runner saw the event.
		filled := *wm
		filled.Offset = pr.lastWritten.Offset
		wm = &filled
	}
	var seq *int64
	if wm != nil {
		seq = &wm.SequenceNumber
	}
	pr.met.flushed(pr.unflushed, seq, time.Since(start))
	pr.sinceCkpt += pr.unflushed
	pr.wmMu.Lock()
	pr.stat.committed += int64(pr.unflushed)
	pr.stat.lastCommit = r.opts.now()
	if wm != nil && (pr.watermark == nil || wm.SequenceNumber > pr.watermark.SequenceNumber) {
		pr.watermark = wm
		pr.stat.enqueued = pr.lastEnqueued
		pr.committedNext = wm
	}
	pr.wmMu.Unlock()
	pr.unflushed = 0
	pr.advanceDropped()
	return nil
}

// checkLease returns an error matching ErrOwnershipLost when the
// partition's lease runs out within the time a commit may take (the sink
// timeout, at most a quarter of GiveUpAfter, the ownership expiration):
// the store has not renewed it (Blob unreachable), and a commit now could
// land after another replica took the partition. The runner then abandons
// what it holds, as on a lost partition; the next owner replays it.
func (pr *partitionRun) checkLease() error {
	lh, ok := pr.src.(leaseHolder)
	if !ok {
		return nil
	}
	at, ok := lh.LeaseExpiry()
	if !ok {
		return nil
	}
	margin := pr.r.opts.SinkTimeout
	if g := pr.r.opts.GiveUpAfter / 4; g > 0 && (margin <= 0 || g < margin) {
		margin = g
	}
	if left := time.Until(at); left < margin {
		return fmt.Errorf("%w: the partition's lease was not renewed and runs out in %s (at %s), less than a commit may take (%s): not committing",
			ErrOwnershipLost, left.Round(time.Millisecond), at.Format(time.RFC3339Nano), margin)
	}
	return nil
}

// behindWatermark reports whether wm, the sink's watermark at open, is past
// the checkpoint stored when the partition was claimed. A watermark without
// an offset is not: checkpoint stores need one, and the first event
// received gives it.
func (pr *partitionRun) behindWatermark(wm *sinks.Position) bool {
	sc, ok := pr.src.(storedCheckpointer)
	if !ok || wm == nil || wm.Offset == "" {
		return false
	}
	stored, known := sc.StoredCheckpoint()
	return known && stored < wm.SequenceNumber
}

// checkpointDue reports whether the committed watermark is to be
// checkpointed now; idle says the last Receive returned no event.
func (pr *partitionRun) checkpointDue(idle bool) bool {
	o := pr.r.opts
	if pr.committedNext == nil {
		return false
	}
	if pr.ckptErr != nil {
		// Whatever the policy: the checkpoint is late already, and each
		// attempt against a store that is down can take seconds.
		return !o.now().Before(pr.ckptRetryAt)
	}
	if idle || (o.CheckpointEveryEvents == 0 && o.CheckpointEveryInterval == 0) {
		return true
	}
	if o.CheckpointEveryEvents > 0 && pr.sinceCkpt >= o.CheckpointEveryEvents {
		return true
	}
	return o.CheckpointEveryInterval > 0 && o.now().Sub(pr.lastCkptAt) >= o.CheckpointEveryInterval
}

// checkpoint writes the committed watermark. A failed checkpoint is not a
// failed partition: the sink holds the data and its watermark, so a later
// attempt (after a backoff, on the next batch, empty or not) or the resume
// merge after a restart covers it.
func (pr *partitionRun) checkpoint(ctx context.Context) error {
	pos := pr.committedNext
	if pos == nil {
		return nil
	}
	err := pr.callStore(ctx, func(ctx context.Context) error { return pr.src.Checkpoint(ctx, *pos) })
	if f := pr.r.opts.storeCalled; f != nil && ctx.Err() == nil && !errors.Is(err, ErrOwnershipLost) {
		f(err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrOwnershipLost) {
			return err
		}
		o := pr.r.opts
		wait := pr.ckptBackoff.Next()
		pr.ckptRetryAt = o.now().Add(wait)
		pr.log.Warn("checkpoint failed; will retry", "seq", pos.SequenceNumber, "retry_in", wait, "error", err)
		pr.ckptErr = err
		return nil
	}
	pr.ckptErr = nil
	pr.ckptBackoff.Reset()
	pr.met.checkpointed(pos.SequenceNumber)
	pr.wmMu.Lock()
	seq := pos.SequenceNumber
	pr.stat.checkpoint = &seq
	pr.wmMu.Unlock()
	pr.checkpointed, pr.committedNext = pos, nil
	pr.sinceCkpt = 0
	pr.lastCkptAt = pr.r.opts.now()
	return nil
}

// checkpointTimeout bounds one checkpoint attempt. The store's client
// retries on its own; a store that does not answer within this fails the
// attempt, which is retried later, instead of holding the partition. With
// an ownership expiration (GiveUpAfter) it is half of it: a store that
// does not answer for that long is not renewing the partition's lease
// either, and the partition must not sit in one call past its lease.
func (r *Runner) checkpointTimeout() time.Duration {
	if r.opts.GiveUpAfter > 0 {
		return min(time.Minute, r.opts.GiveUpAfter/2)
	}
	return time.Minute
}

// callStore runs fn, a checkpoint-store call, within checkpointTimeout and
// heartbeating meanwhile: the partition is working, not stuck, while the
// store's client retries, so the source's watchdog must not reopen it.
func (pr *partitionRun) callStore(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, pr.r.checkpointTimeout())
	defer cancel()
	if pr.beat == nil {
		return fn(ctx)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(beatEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				pr.beat()
			}
		}
	})
	defer wg.Wait()
	defer close(done)
	return fn(ctx)
}

// giveUp ends a partition whose sink has been unavailable for longer than
// GiveUpAfter: what was not flushed is abandoned (the writer's Close drops
// it; the next owner replays it from the sink's watermark) and nothing is
// checkpointed.
func (pr *partitionRun) giveUp(err error) error {
	pr.log.Warn("sink unavailable for too long; giving the partition up, abandoning what was not flushed",
		"unflushed", pr.unflushed, "watermark", posAttr(pr.watermark), "error", err)
	return pr.r.errorf(pr.src, "%w", err)
}

// drain finishes a partition after ctx was cancelled: inHand (a batch
// received before the stop) is written, what was written is flushed and
// the committed watermark checkpointed, within DrainTimeout.
func (pr *partitionRun) drain(ctx context.Context, inHand []sinks.Event) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pr.r.opts.DrainTimeout)
	defer cancel()
	if err := pr.take(dctx, inHand); err != nil {
		return pr.r.errorf(pr.src, "%w: the batch in hand: %v", ErrDrainIncomplete, err)
	}
	// The causes are formatted with %v: a drain cut short by its timeout
	// must not read as a plain cancellation (context.DeadlineExceeded).
	if pr.written {
		if err := pr.flush(dctx); err != nil {
			if errors.Is(err, sinks.ErrFenced) {
				pr.log.Warn("another writer committed this partition; not checkpointing", "error", err)
				return nil
			}
			if errors.Is(err, ErrOwnershipLost) {
				pr.log.Warn("the partition's lease runs out; abandoning what was not flushed", "unflushed", pr.unflushed, "error", err)
				return nil
			}
			return pr.r.errorf(pr.src, "%w: %d events after seq %s not committed (drain timeout %s): %v",
				ErrDrainIncomplete, pr.unflushed, posText(pr.watermark), pr.r.opts.DrainTimeout, err)
		}
	}
	if err := pr.checkpoint(dctx); err != nil {
		if errors.Is(err, ErrOwnershipLost) {
			return nil
		}
		return pr.r.errorf(pr.src, "%w: final checkpoint: %v", ErrDrainIncomplete, err)
	}
	if pr.committedNext != nil {
		return pr.r.errorf(pr.src, "%w: final checkpoint of seq %d not written: %v", ErrDrainIncomplete, pr.committedNext.SequenceNumber, pr.ckptErr)
	}
	pr.log.Info("partition drained", "watermark", posAttr(pr.watermark))
	return nil
}

// retry runs fn until it succeeds, fails with an error not marked
// transient, ctx ends, or MaxAttempts is reached, waiting a capped
// exponential backoff with full jitter between attempts.
//
// beat (nil: none) is called while it waits, so that the source's watchdog
// sees a partition that retries as alive.
func (r *Runner) retry(ctx context.Context, what string, beat func(), fn func(context.Context) error) error {
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
		err := r.callSink(ctx, fn)
		if errors.Is(err, ErrOwnershipLost) {
			// refused before the sink was called (checkLease)
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

// callSink runs fn, one sink call, within SinkTimeout. A call that ran out
// of that deadline while ctx (the partition's) is alive is the sink's
// failure, not a cancellation: it comes back marked transient, so that it
// is retried and counts for the breaker and readiness. The sink cannot
// tell the two apart (both are context.DeadlineExceeded to it); the
// runner, which set the deadline, can.
func (r *Runner) callSink(ctx context.Context, fn func(context.Context) error) error {
	if r.opts.SinkTimeout <= 0 {
		return fn(ctx)
	}
	cctx, cancel := context.WithTimeoutCause(ctx, r.opts.SinkTimeout, ErrSinkTimeout)
	defer cancel()
	err := fn(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(cctx), ErrSinkTimeout) {
		return sinks.Transient(fmt.Errorf("%w: no answer within %s (errors.sink_timeout): %w", ErrSinkTimeout, r.opts.SinkTimeout, err))
	}
	return err
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

// snapshot copies the counters of the partitions the runner drives.
func (r *Runner) snapshot() []partitionSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]partitionSnapshot, 0, len(r.active))
	for id, pr := range r.active {
		pr.wmMu.Lock()
		ps := partitionSnapshot{id: id, checkpoint: pr.stat.checkpoint, received: pr.stat.received,
			enqueued: pr.stat.enqueued, committed: pr.stat.committed, lastCommit: pr.stat.lastCommit, paused: pr.stat.paused}
		if pr.watermark != nil {
			seq := pr.watermark.SequenceNumber
			ps.watermark = &seq
		}
		pr.wmMu.Unlock()
		out = append(out, ps)
	}
	return out
}

// beatEvery is how often a waiting partition tells the watchdog it is
// alive; far below any ownership expiration.
const beatEvery = time.Second

// heartbeat returns src's Heartbeat, or nil when it has none.
func heartbeat(src Partition) func() {
	if h, ok := src.(interface{ Heartbeat() }); ok {
		return h.Heartbeat
	}
	return nil
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

func posText(p *sinks.Position) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprint(p.SequenceNumber)
}

func posAttr(p *sinks.Position) slog.Value {
	if p == nil {
		return slog.StringValue("none")
	}
	return slog.GroupValue(slog.Int64("seq", p.SequenceNumber), slog.String("offset", p.Offset))
}
