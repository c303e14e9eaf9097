package connector

import (
	"context"
	"errors"

	"github.com/ehsink/ehsink/sinks"
)

// givingUp reports whether err stops a partition so that a replica that
// can serve it takes it: this one's sink unavailable (the breaker) or
// Event Hubs unreachable (sourceGone) while other replicas commit.
func givingUp(err error) bool {
	return errors.Is(err, ErrSinkUnavailable) || errors.Is(err, errSourceUnreachable)
}

// giveUp ends a partition for another replica to serve (givingUp): what
// was not flushed is abandoned (the writer's Close drops
// it; the next owner replays it from the sink's watermark) and nothing is
// checkpointed.
func (pr *partitionRun) giveUp(err error) error {
	msg := "sink unavailable for too long; giving the partition up, abandoning what was not flushed"
	if errors.Is(err, errSourceUnreachable) {
		msg = "Event Hubs unreachable for too long while other replicas commit; giving the partition up, abandoning what was not flushed"
	}
	pr.log.Warn(msg, "unflushed", pr.unflushed, "watermark", posAttr(pr.watermark), "error", err)
	return pr.r.errorf(pr.src, "%w", err)
}

// drain finishes a partition after ctx was cancelled: inHand (a batch
// received before the stop) is written, what was written is flushed and
// the committed watermark checkpointed, within DrainTimeout. A partition
// whose sink is unavailable for long enough to give it up (givingUp) is
// given up as it would have been without the stop: its lease goes to a
// replica that can serve it, and the stop is not a failed drain.
func (pr *partitionRun) drain(ctx context.Context, inHand []sinks.Event) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pr.r.opts.DrainTimeout)
	defer cancel()
	if err := pr.take(dctx, inHand); err != nil && !errors.Is(err, errColumnsGrew) {
		// A batch with an event whose column is not there yet is left for
		// the restart under way (take wrote none of it).
		if givingUp(err) {
			return pr.giveUp(err)
		}
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
			if givingUp(err) {
				return pr.giveUp(err)
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
