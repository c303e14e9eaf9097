package connector

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// leasedPartition is an endless partition whose lease expiry the test
// moves: it stays where the last renewal put it.
type leasedPartition struct {
	*memPartition
	expiry atomic.Int64 // unix nanoseconds
	seq    int64
}

func (p *leasedPartition) Receive(ctx context.Context) ([]sinks.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.seq += 5
	return sinktest.Events(p.id, p.seq-5, p.seq-1), nil
}

func (p *leasedPartition) LeaseExpiry() (time.Time, bool) {
	return time.Unix(0, p.expiry.Load()), true
}

// TestRunnerStopsCommittingBeforeLeaseRunsOut: the store stops renewing
// the partition's lease (Blob unreachable) after the first commits. The
// runner must commit nothing whose commit could end after the lease runs
// out: the partition ends matching ErrOwnershipLost, what it held is
// abandoned, and every commit happened while the lease had at least the
// margin left. Without the check it keeps committing on an expired lease.
// The runner's clock moves 100 ms per commit and only then, so the check
// and the commit read the same time.
func TestRunnerStopsCommittingBeforeLeaseRunsOut(t *testing.T) {
	mem := sinktest.NewMemory()
	const (
		expiration = 2 * time.Second
		step       = 100 * time.Millisecond
	)
	var (
		p         *leasedPartition
		clock     atomic.Int64 // unix nanoseconds
		commits   atomic.Int32
		lateAfter atomic.Int64 // commits made with less than the margin left
	)
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	mem.SetFault(func(at sinktest.FaultPoint, _ string) error {
		if at != sinktest.BeforeCommit {
			return nil
		}
		if n := commits.Add(1); n == 3 {
			// the last renewal: the lease now runs out in one expiration
			p.expiry.Store(now().Add(expiration).UnixNano())
		} else if n < 3 {
			p.expiry.Store(now().Add(time.Hour).UnixNano())
		}
		if left := time.Unix(0, p.expiry.Load()).Sub(now()); left < expiration/4 {
			lateAfter.Add(1)
		}
		clock.Add(int64(step))
		return nil
	})
	r, _ := NewRunner(RunnerOptions{Connector: "c", Sink: mem, SinkTimeout: time.Minute, GiveUpAfter: expiration,
		Logger: slog.New(slog.DiscardHandler), now: now})
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p = &leasedPartition{memPartition: newMemPartition("0", 1, store, rand.New(rand.NewPCG(51, 52)), cancel)}
	p.expiry.Store(now().Add(time.Hour).UnixNano())
	err := r.RunPartition(ctx, p)
	if !errors.Is(err, ErrOwnershipLost) {
		t.Fatalf("RunPartition = %v, want ErrOwnershipLost once the lease runs out", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the partition ran until the test's deadline")
	}
	if n := lateAfter.Load(); n != 0 {
		t.Errorf("%d commits started with less than a quarter of the expiration left on the lease", n)
	}
	t.Logf("stopped %s before the lease ran out, after %d commits", time.Unix(0, p.expiry.Load()).Sub(now()), commits.Load())
}

// TestBreakerHoldsClaimsUntilItCloses: a sink timeout opens the breaker at
// once, and claims are held, after the open period too (a claim would
// steal a partition only to give it back); a successful probe closes the
// breaker and ends the hold. A failed claim made meanwhile doubles the
// open period.
func TestBreakerHoldsClaimsUntilItCloses(t *testing.T) {
	b := newBreaker(CircuitBreakerSpec{Failures: 5, ProbeInterval: time.Hour, MaxProbeInterval: 4 * time.Hour}, "c", slog.New(slog.DiscardHandler), nil)
	if b.holdingClaims() {
		t.Fatal("a closed breaker holds claims")
	}
	b.result(sinks.Transient(ErrSinkTimeout))
	if b.state != breakerOpen || !b.holdingClaims() {
		t.Fatalf("after one sink timeout: state %d, holding %v; want open and holding", b.state, b.holdingClaims())
	}
	b.until = time.Now() // the open period is over
	if !b.holdingClaims() {
		t.Fatal("claims let through after the open period: a claim would steal a partition to probe")
	}
	b.claimResult(sinks.Transient(errors.New("connection refused")))
	if b.state != breakerOpen || b.openFor != 2*time.Hour || !b.holdingClaims() {
		t.Fatalf("after a failed claim: state %d, open for %s; want open for 2h, holding", b.state, b.openFor)
	}
	b.result(nil) // a probe (a partition's sink call, or probeIdle) succeeded
	if b.state != breakerClosed || b.holdingClaims() {
		t.Fatalf("after a successful probe: state %d; want closed and not holding", b.state)
	}
}
