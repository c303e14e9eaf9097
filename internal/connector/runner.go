package connector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/schemaregistry"
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
// longer than GiveUpAfter (in a connector: while another replica is seen
// committing): what it had not flushed is abandoned (the next
// owner replays it from the sink's watermark), so that the partition can
// go to a replica whose sink answers.
var ErrSinkUnavailable = errors.New("sink unavailable")

// ErrSinkTimeout is matched (errors.Is) by the error of a sink call whose
// destination did not answer for RunnerOptions.SinkTimeout (a half-open
// connection, a stuck server), or that still had not returned at the bound
// of an answering call. Such an error is marked transient
// (sinks.IsTransient).
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
	// Decoder, if not nil, turns each event's Avro body into JSON before
	// the filter and the sink see it (source.format avro); an event it
	// cannot decode is dead-lettered. If nil, bodies are handed on as
	// they are.
	Decoder *schemaregistry.Decoder
	// DeadLetters stores dead letters for writers that do not store them
	// themselves. If nil, dead letters of such writers stop the partition
	// with an error, as with Tolerance "none".
	DeadLetters DeadLetterStore
	// Revision is the connector's configuration revision ([Spec.Revision]),
	// stored with its dead letters by sinks that keep it. If empty, none.
	Revision string
	// Retry bounds retries of transient sink failures.
	Retry RetrySpec
	// CircuitBreaker stops every partition from receiving after repeated
	// transient sink failures. Zero fields take their defaults.
	CircuitBreaker CircuitBreakerSpec
	// GiveUpAfter, if not zero, stops a partition with ErrSinkUnavailable
	// once the circuit breaker has been open that long while the partition
	// waits on it, so that the partition's lease can go to a replica whose
	// sink answers. The connector sets it to the ownership expiration, and
	// gives a partition up while another replica of the connector is seen
	// committing (see peers), as soon as that is seen, without waiting
	// GiveUpAfter; when no replica reaches the sink, its partitions stay
	// and wait behind the breaker.
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
	// SinkTimeout, if not zero, bounds the silence of each sink call
	// (Open, Write, Flush, DeadLetter): the time since its destination
	// last answered (sinks.Progress), or since the call began. A call the
	// runner ends for it (not the partition's own ctx) fails with an error
	// matching ErrSinkTimeout, marked transient: it is retried, counted by
	// the circuit breaker and passed to readiness like any other transient
	// sink failure. A call that keeps answering is ended at callBound, and
	// a Flush past SinkTimeout when its lease fails checkLease.
	SinkTimeout time.Duration
	// Logger receives the runner's logs; give it the connector's name as an
	// attribute. If nil, logs are discarded.
	Logger *slog.Logger
	// Metrics records the runner's metrics. If nil, none.
	Metrics *Metrics
	// now is the clock; tests replace it.
	now func() time.Time
	// auto, when set, is the connector's columns: auto without a reader
	// schema: an event whose writer schema has a field the columns lack
	// is not written; its partition drains what came before and waits
	// for the restart auto asks for (errColumnsGrew).
	auto *autoState
	// pause, when set, is the connector's pause switch (see Control).
	pause *gate
	// sinkCalled, when set, receives the outcome of every sink call, so
	// that readiness follows the sink.
	sinkCalled func(error)
	// sourceDown, when set, says since when the source has not been
	// reached (zero while it is): a partition of a replica that cannot
	// reach Event Hubs while other replicas commit is given up after
	// GiveUpAfter (sourceGone).
	sourceDown func() time.Time
	// storeCalled, when set, receives the outcome of every checkpoint
	// call that was not cut short by the partition's ctx or refused for a
	// lost ownership, so that readiness follows the checkpoint store.
	storeCalled func(error)
	// lettersStored, when set, is told that dead letters were made
	// durable (stored by the runner, or committed by a flush after the
	// writer took them), so that the status counts them soon.
	lettersStored func()
}

// DeadLetterStore keeps dead letters durably. Store must have made the
// letters durable when it returns nil. Implementations must be safe for
// concurrent use by the partitions of a connector.
type DeadLetterStore interface {
	// Store makes the dead letters of one partition durable. committed
	// is the sequence number the sink has committed the partition up to
	// (-1: nothing yet): the letters are of events after it, and a store
	// may skip those it holds already (a replay's).
	Store(ctx context.Context, partition string, committed int64, letters []sinks.DeadLetter) error
}

// Runner moves events of owned partitions through dedupe, the sink and the
// checkpoint, in that order. It is safe for concurrent use: RunPartition is
// called once per owned partition, each in its own goroutine.
type Runner struct {
	opts RunnerOptions
	log  *slog.Logger

	brk *breaker

	mu         sync.Mutex // guards active and staySource
	active     map[string]*partitionRun
	staySource time.Time // the Event Hubs outage whose "partitions stay" was logged
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
	decoded       []byte          // scratch: the JSON of a batch's Avro bodies (avro.go)
	// dropTail is the last event the filter dropped (or dead-lettered
	// through the runner's store), when it comes after every event handed
	// to the writer: the watermark moves to it once the writer holds
	// nothing unflushed. dropN counts those events for the checkpoint policy.
	dropTail *sinks.Position
	dropN    int
	lettered bool          // the writer took dead letters its next flush commits
	readOn   bool          // this run reads on after a fence (RunPartition)
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

// seeker is implemented by a Partition that can move its reading to just
// after a position while keeping its lease (the source's).
type seeker interface {
	Seek(pos sinks.Position) error
}

// errReadOn is handleFailed's answer to a first fence after a claim when
// src is a seeker: RunPartition runs the partition again, reading on after
// the other writer's commit.
var errReadOn = errors.New("fenced: read on after the other writer's commit")

// RunPartition drives one partition until ctx is cancelled (then it drains:
// the batch in hand is flushed and checkpointed within DrainTimeout, and it
// returns nil), the partition is lost (nil; nothing more is checkpointed),
// or a permanent failure (an error naming the connector and partition).
//
// A claim can meet one fence that is no loss: the previous owner finishing
// a commit it began before the claim (ErrFenced). The partition is then
// read on after that commit, once: a second fence means another writer is
// still at work, and the partition is let go as when it is lost.
func (r *Runner) RunPartition(ctx context.Context, src Partition) error {
	err := r.runPartition(ctx, src, false)
	if errors.Is(err, errReadOn) {
		err = r.runPartition(ctx, src, true)
	}
	return err
}

// runPartition is one run of RunPartition; again is the run after a fence,
// which opens the writer anew and moves the reading to its watermark.
func (r *Runner) runPartition(ctx context.Context, src Partition, again bool) (err error) {
	log := r.log.With("partition", src.ID())
	w, wm, err := r.openWriter(ctx, src)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return r.errorf(src, "open sink: %w", err)
	}
	if again {
		if err := r.readOn(src, wm); err != nil {
			log.Warn("another writer committed this partition; giving it up", "error", err)
			if cerr := w.Close(context.WithoutCancel(ctx)); cerr != nil {
				return r.errorf(src, "close sink writer: %w", cerr)
			}
			return nil
		}
	}
	pr := r.newPartitionRun(src, w, wm, log)
	pr.readOn = again
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
	pr := &partitionRun{r: r, p: w, src: src, beat: heartbeat(src), log: log, watermark: wm, lastCkptAt: r.opts.now().Add(-checkpointPhase(r.opts.CheckpointEveryInterval)),
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
		case givingUp(rerr):
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
	if givingUp(err) && ctx.Err() == nil {
		return pr.giveUp(err)
	}
	if errors.Is(err, sinks.ErrFenced) {
		if _, ok := pr.src.(seeker); ok && !pr.readOn && ctx.Err() == nil {
			log.Info("another writer committed this partition after the claim; reading on after its commit", "error", err)
			return errReadOn
		}
		log.Warn("another writer committed this partition; giving it up", "error", err)
		return nil
	}
	if errors.Is(err, errColumnsGrew) {
		// The batch is not written: the restart auto asked for cancels
		// ctx, and the connector reads it again with the column added.
		<-ctx.Done()
		return pr.drain(ctx, nil)
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

// readOn moves src's reading to just after wm, the watermark of the writer
// opened after a fence.
func (r *Runner) readOn(src Partition, wm *sinks.Position) error {
	sk, ok := src.(seeker)
	switch {
	case !ok:
		return errors.New("the partition cannot seek")
	case wm == nil:
		return errors.New("the sink reports no watermark after the fence")
	}
	return sk.Seek(*wm)
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
	err = r.retry(ctx, "open sink", callGuard{beat: heartbeat(src)}, func(ctx context.Context) error {
		w, wm, err = r.opts.Sink.Open(ctx, src.ID())
		return err
	})
	return w, wm, err
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

// checkpointPhase is how far into its checkpoint interval a partition
// starts: a random part of it. Partitions claimed together (a replica's
// start, a failover: hundreds at once) would otherwise checkpoint in the
// same instant, interval after interval: a burst of store requests each
// time, where the same requests spread over the interval cost nothing more.
func checkpointPhase(every time.Duration) time.Duration {
	if every <= 0 {
		return 0
	}
	return rand.N(every)
}
