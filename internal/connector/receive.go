package connector

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// mayReceive waits while the circuit breaker is open or the connector is
// paused. It returns ctx.Err() when ctx ended first, and an error matching
// ErrSinkUnavailable when the breaker stayed open past GiveUpAfter and
// the partition may be given up (breaker.giveUpCheck).
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
		if err := pr.sourceGone(ctx); err != nil {
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

// errSourceUnreachable is matched by the error of a partition given up
// because its replica could not reach Event Hubs while others commit.
var errSourceUnreachable = errors.New("event hubs unreachable")

// sourceGone returns an error matching errSourceUnreachable when the
// connector has not reached Event Hubs for GiveUpAfter and another
// replica is seen committing (peers): over a half-open connection the
// receives come back empty, the partition looks alive, and its lease,
// renewed through the checkpoint store, would keep it from a replica that
// can read it. When no replica is seen committing (Event Hubs down for
// everyone), the partition stays. The outage is seen by the
// partition-properties calls (connState.refreshProps, bounded by the lag
// interval).
func (pr *partitionRun) sourceGone(ctx context.Context) error {
	down, p, after := pr.r.opts.sourceDown, pr.r.brk.peers, pr.r.opts.GiveUpAfter
	if down == nil || p == nil || after <= 0 {
		return nil
	}
	since := down()
	if since.IsZero() {
		return nil
	}
	// read the store from the start of the outage, so that the evidence
	// is there when the wait is over
	p.observe(ctx, since)
	if time.Since(since) < after {
		return nil
	}
	if !p.progressing(since) {
		pr.r.mu.Lock()
		first := !pr.r.staySource.Equal(since)
		pr.r.staySource = since
		pr.r.mu.Unlock()
		if first {
			pr.r.log.Warn("Event Hubs not reached, and no other replica is seen committing: partitions stay",
				"since", since.Format(time.RFC3339), "store_error", p.lastError())
		}
		return nil
	}
	return fmt.Errorf("%w: no partition-properties call answered for %s (longer than %s), while other replicas commit",
		errSourceUnreachable, time.Since(since).Round(time.Second), after)
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
