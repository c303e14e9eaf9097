package connector

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/internal/backoff"
	"log/slog"
	"sync"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// Circuit breaker states, as the ehsink_circuit_breaker_state gauge shows them.
const (
	breakerClosed   = 0 // the sink works: partitions receive and write
	breakerOpen     = 1 // the sink failed repeatedly: no partition receives; one probe after the open period
	breakerHalfOpen = 2 // one sink call is probing; the others wait for its result
)

// breaker is a connector's circuit breaker on its sink. Every sink call
// of every partition of the connector goes through it (acquire, then
// result). After Failures transient failures in a row it opens: partitions
// stop receiving (the SDK's prefetch stays where it is, no batch grows in
// memory) and their sink calls wait, instead of each partition hammering
// a sink that is down. When the open period ends, one call is let through
// as a probe; its success closes the breaker, its failure opens it again
// for twice as long, up to MaxProbeInterval. Safe for concurrent use.
type breaker struct {
	spec      CircuitBreakerSpec
	connector string
	log       *slog.Logger
	met       *Metrics

	mu          sync.Mutex // guards the fields below
	state       int
	failures    int             // transient failures in a row
	openFor     time.Duration   // the current open period
	probes      backoff.Backoff // the open periods: ProbeInterval, doubling to MaxProbeInterval
	until       time.Time       // end of the open period
	outageSince time.Time       // when the breaker last opened from closed
	lastErr     error           // the last transient failure
	changed     chan struct{}   // closed and replaced at every state change

	verdictOutage time.Time // the outage lastVerdict was logged for
	lastVerdict   int       // what the partitions of that outage did (verdictStay, verdictGiveUp)

	// peers, when set (before any partition runs), tells whether another
	// replica of the connector commits; a partition is given up only then.
	// When nil, a partition is given up once it waited GiveUpAfter.
	peers *peers
}

func newBreaker(spec CircuitBreakerSpec, connector string, log *slog.Logger, met *Metrics) *breaker {
	spec = spec.withDefaults()
	spec.MaxProbeInterval = max(spec.MaxProbeInterval, spec.ProbeInterval) // a hand-built spec; Validate reports it
	b := &breaker{spec: spec, connector: connector, log: log, met: met, changed: make(chan struct{}),
		probes: backoff.Backoff{Initial: spec.ProbeInterval, Max: spec.MaxProbeInterval}}
	met.breakerState(connector, breakerClosed)
	return b
}

// setLocked moves to state s and wakes the waiters. b.mu is held.
func (b *breaker) setLocked(s int) {
	b.state = s
	close(b.changed)
	b.changed = make(chan struct{})
	b.met.breakerState(b.connector, s)
}

// waitReceive blocks while the breaker is open and its open period runs,
// calling beat meanwhile. After the open period, partitions receive again:
// the write of what they receive competes for the probe. It returns
// ctx.Err() when ctx ended first, and an error matching ErrSinkUnavailable
// when the caller may give its partition up (giveUpCheck).
func (b *breaker) waitReceive(ctx context.Context, since time.Time, giveUpAfter time.Duration, beat func()) error {
	for {
		b.mu.Lock()
		if b.state == breakerClosed {
			b.mu.Unlock()
			return nil
		}
		b.mu.Unlock()
		check, err := b.giveUpCheck(ctx, since, giveUpAfter)
		if err != nil {
			return err
		}
		b.mu.Lock()
		wait, changed := time.Until(b.until), b.changed
		closed := b.state == breakerClosed
		b.mu.Unlock()
		if closed || wait <= 0 {
			return nil
		}
		if !sleepOrChange(ctx, min(wait, check), changed, beat) {
			return ctx.Err()
		}
	}
}

// acquire blocks until the caller may call the sink: at once when the
// breaker is closed; when it is open, after the open period, as the one
// probe (or after the probe closed it). It returns ctx.Err() when ctx ended
// first, and an error matching ErrSinkUnavailable when the caller may give
// its partition up (giveUpCheck). A caller that acquired must report with
// result.
func (b *breaker) acquire(ctx context.Context, since time.Time, giveUpAfter time.Duration, beat func()) error {
	for {
		b.mu.Lock()
		switch {
		case b.state == breakerClosed:
			b.mu.Unlock()
			return nil
		case b.state == breakerOpen && !time.Now().Before(b.until):
			if b.peers != nil && giveUpAfter > 0 {
				// A caller that may give its partition up does so rather
				// than probe: a probe of a sink that does not answer holds
				// it for a sink timeout, round after round, and a replica
				// that keeps one partition is still an owner to the
				// others' balanced load balancing, which then claims none
				// of those it gave up.
				b.mu.Unlock()
				if _, err := b.giveUpCheck(ctx, since, giveUpAfter); err != nil {
					return err
				}
				b.mu.Lock()
				if b.state != breakerOpen || time.Now().Before(b.until) {
					b.mu.Unlock()
					continue
				}
			}
			b.setLocked(breakerHalfOpen)
			b.mu.Unlock()
			b.log.Info("circuit breaker half-open: probing the sink")
			return nil
		}
		b.mu.Unlock()
		check, err := b.giveUpCheck(ctx, since, giveUpAfter)
		if err != nil {
			return err
		}
		b.mu.Lock()
		wait, changed := time.Until(b.until), b.changed
		switch b.state {
		case breakerClosed:
			wait = 0 // closed meanwhile: go round
		case breakerHalfOpen:
			wait = time.Hour // until the probe reports
		}
		b.mu.Unlock()
		if wait <= 0 {
			continue
		}
		if !sleepOrChange(ctx, min(wait, check), changed, beat) {
			return ctx.Err()
		}
	}
}

// waitStart is when a caller that began waiting at since started to wait
// on this outage. b.mu is held.
func (b *breaker) waitStart(since time.Time) time.Time {
	if since.After(b.outageSince) {
		return since
	}
	return b.outageSince
}

// giveUpCheck decides whether a caller that began waiting at since on a
// breaker that is not closed gives its partition up: it returns an error
// matching ErrSinkUnavailable, with peers set, as soon as another replica
// of the connector is seen committing during this outage
// (peers.progressing): the sink answers for someone else, who can take
// the partition over, and each second the partition stays here it is not
// read (the bound a user gets is 2 × ownership_expiration, and the
// detection and the other replica's claims take most of it). The evidence
// itself needs two reads of the store an update_interval apart, both
// after the outage began: a sink that answers again within that (the
// breaker's probe closes it) keeps its partitions. Without that evidence
// the partition stays and keeps waiting: when no replica reaches the sink,
// handing partitions around helps no one; after waiting after (zero:
// never) that verdict is logged. Without peers (a runner of its own), the
// partition is given up once it waited after. Otherwise it returns how
// long the caller may wait before asking again. While the breaker is open
// it reads the peers' progress (at most once per their interval), outside
// b.mu.
func (b *breaker) giveUpCheck(ctx context.Context, since time.Time, after time.Duration) (time.Duration, error) {
	if after <= 0 {
		return time.Hour, nil
	}
	b.mu.Lock()
	if b.state == breakerClosed {
		b.mu.Unlock()
		return time.Hour, nil
	}
	outage := b.outageSince
	left := after - time.Since(b.waitStart(since))
	b.mu.Unlock()
	if b.peers == nil {
		if left > 0 {
			return max(left, time.Millisecond), nil
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		return 0, fmt.Errorf("%w: the circuit breaker has been open for %s, and this partition waited longer than %s (last error: %w)",
			ErrSinkUnavailable, time.Since(b.outageSince).Round(time.Second), after, b.lastErr)
	}
	b.peers.observe(ctx, outage)
	next := max(b.peers.untilRead(), time.Millisecond)
	if !b.peers.progressing(outage) {
		if left <= 0 {
			b.verdict(outage, verdictStay, after)
		}
		return next, nil
	}
	b.verdict(outage, verdictGiveUp, after)
	b.mu.Lock()
	defer b.mu.Unlock()
	return 0, fmt.Errorf("%w: the circuit breaker has been open for %s, and another replica commits meanwhile (last error: %w)",
		ErrSinkUnavailable, time.Since(b.outageSince).Round(100*time.Millisecond), b.lastErr)
}

// What the partitions of a connector whose breaker has been open for the
// give-up wait do, as logged once per outage and decision.
const (
	verdictNone   = iota
	verdictStay   // no other replica is seen committing: the partitions stay
	verdictGiveUp // another replica commits: the partitions are given up
)

// verdict logs, once per outage and decision, which way the partitions
// of an outage that began at outage went.
func (b *breaker) verdict(outage time.Time, v int, after time.Duration) {
	b.mu.Lock()
	if b.verdictOutage.Equal(outage) && b.lastVerdict == v {
		b.mu.Unlock()
		return
	}
	b.verdictOutage, b.lastVerdict = outage, v
	lastErr := b.lastErr
	b.mu.Unlock()
	switch v {
	case verdictGiveUp:
		b.log.Warn("sink unreachable here while peers commit: giving partitions up",
			"breaker_open_for", time.Since(outage).Round(100*time.Millisecond), "error", lastErr)
	case verdictStay:
		attrs := []any{"waited_longer_than", after, "error", lastErr}
		if err := b.peers.lastError(); err != nil {
			attrs = append(attrs, "store_error", err)
		}
		b.log.Warn("sink unreachable for every replica: partitions stay",
			append(attrs, "evidence", "no checkpoint of another replica advanced within the ownership expiration")...)
	}
}

// result records the outcome of a sink call let through by acquire.
// Failures that are not transient (the sink refused the data or the
// config) say nothing about the sink's health and are not counted.
func (b *breaker) result(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err == nil:
		b.failures = 0
		if b.state != breakerClosed {
			b.openFor = 0
			b.probes.Reset()
			b.setLocked(breakerClosed)
			b.log.Info("circuit breaker closed: the sink answers again")
		}
	case b.state == breakerHalfOpen && !errors.Is(err, ErrSinkTimeout) &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// the probe was called off, not answered: the next caller probes
		b.until = time.Now()
		b.setLocked(breakerOpen)
	case !sinks.IsTransient(err):
		if b.state == breakerHalfOpen {
			// the sink answered, if only to refuse: let the others try
			b.setLocked(breakerClosed)
		}
	case b.state == breakerHalfOpen:
		b.lastErr = err
		b.openFor = b.probes.Next()
		b.until = time.Now().Add(b.openFor)
		b.setLocked(breakerOpen)
		b.log.Warn("circuit breaker open again: the probe failed", "next_probe_in", b.openFor, "error", err)
	case b.state == breakerClosed:
		b.lastErr = err
		b.failures++
		// A call that had no answer for the whole sink timeout already
		// waited longer than Failures quick refusals take: the sink is
		// not answering, and every other partition's call would wait as
		// long. It opens the breaker on its own.
		if b.failures >= b.spec.Failures || errors.Is(err, ErrSinkTimeout) {
			b.outageSince = time.Now()
			b.probes.Reset()
			b.openFor = b.probes.Next()
			b.until = time.Now().Add(b.openFor)
			b.setLocked(breakerOpen)
			b.log.Error("circuit breaker open: the sink failed repeatedly; partitions stop receiving until a probe succeeds",
				"failures", b.failures, "next_probe_in", b.openFor, "error", err)
		}
	}
}

// isClosed reports whether the breaker is closed.
func (b *breaker) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == breakerClosed
}

// calledOff reports that a call let through by acquire was not made (or
// its outcome says nothing of the sink): a probe that was called off lets
// the next caller probe.
func (b *breaker) calledOff() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == breakerHalfOpen {
		b.until = time.Now()
		b.setLocked(breakerOpen)
	}
}

// holdingClaims reports whether the connector should claim no new
// partition: whenever the breaker is not closed. A claim is no probe: it
// would take a partition from a replica that serves it (a steal, in the
// balanced or greedy rounds) only to give it back when its sink Open
// fails. The probes are the sink calls of the partitions the connector
// still holds, or, when it holds none, probeIdle's.
func (b *breaker) holdingClaims() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state != breakerClosed
}

// claimResult records the outcome of the sink Open a partition's claim
// made outside acquire. While the breaker is open that Open is a probe:
// its success closes the breaker, and a transient failure opens it again
// for twice as long, so that a replica whose sink is down tries one claim
// per open period rather than one per load-balancing round. Otherwise it
// counts as any sink call.
func (b *breaker) claimResult(err error) {
	b.mu.Lock()
	if b.state == breakerOpen && err != nil && sinks.IsTransient(err) {
		b.lastErr = err
		b.openFor = b.probes.Next()
		b.until = time.Now().Add(b.openFor)
		b.setLocked(breakerOpen)
		next := b.openFor
		b.mu.Unlock()
		b.log.Warn("circuit breaker open again: the sink failed when a partition was claimed", "next_probe_in", next, "error", err)
		return
	}
	b.mu.Unlock()
	b.result(err)
}

// lastError returns the last transient failure the breaker counted.
func (b *breaker) lastError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastErr == nil {
		return errors.New("none recorded")
	}
	return b.lastErr
}

// sleepOrChange waits d or until changed is closed, calling beat (if not
// nil) every beatEvery; it returns false when ctx ended first.
func sleepOrChange(ctx context.Context, d time.Duration, changed <-chan struct{}, beat func()) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(beatEvery)
	defer tick.Stop()
	for {
		if beat != nil {
			beat()
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
			return true
		case <-t.C:
			return true
		case <-tick.C:
		}
	}
}
