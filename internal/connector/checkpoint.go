package connector

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

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
	if o.CheckpointEveryEvents == 0 && o.CheckpointEveryInterval == 0 {
		return true
	}
	if idle {
		// A partition gone quiet is checkpointed at once, so that readers
		// of the store (KEDA, status) see it caught up; but no more often
		// than a quarter of the interval, or a trickle of events (each
		// batch followed by an empty one) would write one per event.
		return pr.checkpointed == nil || o.now().Sub(pr.lastCkptAt) >= o.CheckpointEveryInterval/4
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
