package connector

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
)

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
	flushed := false
	if pr.flushDue() {
		if err := pr.flush(ctx); err != nil {
			return err
		}
		flushed = true
	}
	// Checked on idle batches too, so that the last commit of a partition
	// that went quiet is checkpointed, and a failed checkpoint retried.
	// Not while the writer gathers a batch it has not flushed: the
	// checkpoint of an earlier commit written then may come after the sink
	// stopped answering, and other replicas, seeing this owner's
	// checkpoint advance, would take it for a sink that answers here and
	// give their partitions up (peers.progressing). The flush that ends
	// the batch checkpoints it.
	if (flushed || n == 0 || !pr.written) && pr.checkpointDue(n == 0) {
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
	if f == nil && pr.r.opts.Decoder == nil {
		return pr.write(ctx, events)
	}
	pr.decoded = pr.decoded[:0]
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
		if pr.r.opts.Decoder != nil {
			poison, err := pr.decode(ctx, ev)
			if err != nil {
				return err
			}
			if poison != nil {
				failed = append(failed, sinks.RejectedEvent{Event: *ev, Err: poison})
				tail, hasTail = ev.Position(), true
				continue
			}
		}
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
	err := r.retry(ctx, opWrite, callGuard{beat: pr.beat}, func(ctx context.Context) error {
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
		letters[i] = sinks.DeadLetter{Event: rj.Event.Received(), Reason: rj.Err.Error(), FailedAt: now}
		pr.log.Warn("event dead-lettered", "seq", rj.Event.SequenceNumber, "reason", rj.Err)
	}
	pr.met.deadLettered(len(letters))
	var err error
	ctx = deadletters.WithRevision(ctx, r.opts.Revision)
	if dl, ok := pr.p.(sinks.DeadLetterer); ok {
		err = r.retry(ctx, "dead-letter", callGuard{beat: pr.beat}, func(ctx context.Context) error { return dl.DeadLetter(ctx, letters) })
	} else if r.opts.DeadLetters != nil {
		err = r.retry(ctx, "dead-letter", callGuard{beat: pr.beat}, func(ctx context.Context) error {
			committed := int64(-1)
			if pr.watermark != nil {
				committed = pr.watermark.SequenceNumber
			}
			return r.opts.DeadLetters.Store(ctx, pr.src.ID(), committed, letters)
		})
	} else {
		return r.errorf(pr.src, "event seq %d rejected by the sink and no dead-letter path: %w", first.Event.SequenceNumber, first.Err)
	}
	if err != nil {
		return r.errorf(pr.src, "store dead letters for seq %d: %w", first.Event.SequenceNumber, err)
	}
	if _, ok := pr.p.(sinks.DeadLetterer); ok {
		pr.lettered = true
	} else {
		r.lettersStored()
	}
	return nil
}

// lettersStored passes on that dead letters are durable.
func (r *Runner) lettersStored() {
	if r.opts.lettersStored != nil {
		r.opts.lettersStored()
	}
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
		err := r.retry(ctx, "flush", callGuard{beat: pr.beat, lease: pr.checkLease}, func(ctx context.Context) error {
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
	committed := pr.unflushed
	if t, ok := pr.p.(sinks.Trimmer); ok {
		// another writer committed these first (a steal): theirs, not ours
		n := min(t.Trimmed(), committed)
		committed -= n
		pr.met.skippedEvents(n)
	}
	pr.met.flushed(committed, seq, time.Since(start))
	pr.sinceCkpt += pr.unflushed
	pr.wmMu.Lock()
	pr.stat.committed += int64(committed)
	pr.stat.lastCommit = r.opts.now()
	if wm != nil && (pr.watermark == nil || wm.SequenceNumber > pr.watermark.SequenceNumber) {
		pr.watermark = wm
		pr.stat.enqueued = pr.lastEnqueued
		pr.committedNext = wm
	}
	pr.wmMu.Unlock()
	pr.unflushed = 0
	pr.advanceDropped()
	if pr.lettered {
		pr.lettered = false
		r.lettersStored()
	}
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
	if left := at.Sub(pr.r.opts.now()); left < margin {
		return fmt.Errorf("%w: the partition's lease was not renewed and runs out in %s (at %s), less than a commit may take (%s): not committing",
			ErrOwnershipLost, left.Round(time.Millisecond), at.Format(time.RFC3339Nano), margin)
	}
	return nil
}
