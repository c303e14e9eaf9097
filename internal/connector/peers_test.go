package connector

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/sinks"
)

// fakePeerStore is a checkpoint store's listing: leases and checkpoint
// sequence numbers per partition, set by the test.
type fakePeerStore struct {
	mu     sync.Mutex
	owners map[string]azeventhubs.Ownership
	seqs   map[string]int64
	err    error
	reads  int
	onRead func(s *fakePeerStore) // called (under mu) at every read
}

func newFakePeerStore() *fakePeerStore {
	return &fakePeerStore{owners: map[string]azeventhubs.Ownership{}, seqs: map[string]int64{}}
}

func (f *fakePeerStore) own(partition, owner string, at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owners[partition] = azeventhubs.Ownership{PartitionID: partition, OwnerID: owner, LastModifiedTime: at}
}

func (f *fakePeerStore) checkpoint(partition string, seq int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seqs[partition] = seq
}

func (f *fakePeerStore) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakePeerStore) ListOwnership(ctx context.Context, ns, hub, group string, _ *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.onRead != nil {
		f.onRead(f)
	}
	if f.err != nil {
		return nil, f.err
	}
	var out []azeventhubs.Ownership
	for _, o := range f.owners {
		out = append(out, o)
	}
	return out, nil
}

func (f *fakePeerStore) ListCheckpoints(ctx context.Context, ns, hub, group string, _ *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	var out []azeventhubs.Checkpoint
	for id, seq := range f.seqs {
		out = append(out, azeventhubs.Checkpoint{PartitionID: id, SequenceNumber: &seq})
	}
	return out, nil
}

// Spacing of the reads and ownership expiration of newClockedPeers.
const (
	peerExp   = 10 * time.Second
	peerEvery = time.Second
)

// newClockedPeers returns a peers reading a fake store on a clock the
// test moves (*clock), with this replica's owner ID "me".
func newClockedPeers() (*peers, *fakePeerStore, *time.Time) {
	clock := time.Unix(1_000_000, 0)
	store := newFakePeerStore()
	p := newPeers(store, "ns", "hub", "$Default", "me", peerExp, peerEvery, nil)
	p.now = func() time.Time { return clock }
	return p, store, &clock
}

// TestPeersProgress: only a checkpoint that advances between two reads,
// of a partition the same other owner holds under a live lease at both,
// is evidence; reads are spaced by the interval; a failed read adds
// nothing; evidence ages out after the ownership expiration and does not
// carry over to the next outage.
func TestPeersProgress(t *testing.T) {
	p, store, now := newClockedPeers()
	ctx := context.Background()
	outage := *now
	step := func(d time.Duration) { *now = now.Add(d) }
	fresh := func() time.Time { return now.Add(-time.Second) }

	store.own("0", "me", fresh())
	store.own("1", "other", fresh())
	store.own("2", "dead", now.Add(-2*peerExp))
	store.own("3", "", fresh())
	for _, id := range []string{"0", "1", "2", "3"} {
		store.checkpoint(id, 10)
	}
	p.observe(ctx, outage)
	if p.progressing(outage) {
		t.Fatal("progress after the first read, which is only a baseline")
	}

	// ours, a dead lease and a released one advance: no evidence
	for _, id := range []string{"0", "2", "3"} {
		store.checkpoint(id, 20)
	}
	step(peerEvery)
	store.own("0", "me", fresh())
	store.own("1", "other", fresh())
	p.observe(ctx, outage)
	if p.progressing(outage) {
		t.Fatal("progress from partitions no other live owner holds")
	}

	// reads are spaced: a read before the interval is skipped
	store.checkpoint("1", 11)
	step(peerEvery / 2)
	p.observe(ctx, outage)
	if p.progressing(outage) || store.reads != 2 {
		t.Fatalf("read %d times, progressing %v; want the third read skipped", store.reads, p.progressing(outage))
	}
	if got := p.untilRead(); got != peerEvery/2 {
		t.Errorf("untilRead %s, want %s", got, peerEvery/2)
	}
	step(peerEvery / 2)
	store.own("1", "other", fresh())
	p.observe(ctx, outage)
	if !p.progressing(outage) {
		t.Fatal("no progress although another owner's checkpoint advanced")
	}

	// evidence ages out; a failed read adds none
	store.fail(errors.New("store down"))
	step(peerExp)
	store.checkpoint("1", 12)
	p.observe(ctx, outage)
	if p.progressing(outage) {
		t.Fatal("progress from a failed read, or from evidence older than the expiration")
	}
	if p.lastError() == nil {
		t.Error("the failed read's error is not kept")
	}
	store.fail(nil)

	// a partition that changed owners between reads is a new baseline
	step(peerEvery)
	store.own("1", "third", fresh())
	store.checkpoint("1", 13)
	p.observe(ctx, outage)
	if p.progressing(outage) {
		t.Fatal("progress counted across a change of owner")
	}
	step(peerEvery)
	store.own("1", "third", fresh())
	store.checkpoint("1", 14)
	p.observe(ctx, outage)
	if !p.progressing(outage) {
		t.Fatal("no progress from the new owner's advance")
	}

	// a new outage starts from a new baseline
	next := *now
	if p.progressing(next) {
		t.Fatal("evidence of an earlier outage counts for a new one")
	}
	step(peerEvery / 10)
	store.checkpoint("1", 15)
	store.own("1", "third", fresh())
	p.observe(ctx, next)
	if p.progressing(next) {
		t.Fatal("the first read of a new outage counted as progress")
	}
}

// TestPeersTwoOutagesAtOnce: the sink's outage and Event Hubs' (each with
// its own beginning) ask the same reader in turn; each sees the other
// replica's progress once two reads after its beginning show it, instead
// of each resetting the other's baseline.
func TestPeersTwoOutagesAtOnce(t *testing.T) {
	p, store, now := newClockedPeers()
	ctx := context.Background()
	sinkOutage := *now
	seq := int64(10)
	advance := func() {
		*now = now.Add(peerEvery / 2)
		seq++
		store.checkpoint("1", seq)
		store.own("1", "other", *now)
	}
	advance()
	p.observe(ctx, sinkOutage)
	advance()
	sourceOutage := *now
	for i := 0; i < 6; i++ {
		p.observe(ctx, sinkOutage)
		p.observe(ctx, sourceOutage)
		advance()
	}
	if !p.progressing(sinkOutage) || !p.progressing(sourceOutage) {
		t.Fatalf("after %d reads: progressing for the sink's outage %v, for Event Hubs' %v; want both", store.reads, p.progressing(sinkOutage), p.progressing(sourceOutage))
	}
	if later := *now; p.progressing(later) {
		t.Fatal("an advance seen before an outage began counts for it")
	}
}

// breakerWithPeers returns an open breaker (the probe an hour away) whose
// give-up asks a peers reading store every 5ms.
func breakerWithPeers(t *testing.T, store *fakePeerStore) *breaker {
	t.Helper()
	b := newBreaker(CircuitBreakerSpec{Failures: 1, ProbeInterval: time.Hour, MaxProbeInterval: time.Hour}, "c", slog.New(slog.DiscardHandler), nil)
	b.peers = newPeers(store, "ns", "hub", "$Default", "me", time.Minute, 5*time.Millisecond, nil)
	b.result(sinks.Transient(ErrSinkTimeout))
	if b.state != breakerOpen {
		t.Fatalf("breaker state %d after a sink timeout, want open", b.state)
	}
	return b
}

// TestBreakerStaysWithoutPeers: with the give-up wait long past and no
// other replica committing (none at all, or one whose checkpoints stand
// still), a partition waiting on the open breaker is not given up: it
// waits, heartbeating, until its ctx ends, and the store is read while it
// waits.
func TestBreakerStaysWithoutPeers(t *testing.T) {
	for name, setup := range map[string]func(*fakePeerStore){
		"alone":           func(*fakePeerStore) {},
		"peer stuck":      func(s *fakePeerStore) { s.own("1", "other", time.Now()); s.checkpoint("1", 5) },
		"store unreached": func(s *fakePeerStore) { s.fail(errors.New("store down")) },
	} {
		t.Run(name, func(t *testing.T) {
			store := newFakePeerStore()
			setup(store)
			b := breakerWithPeers(t, store)
			var beats atomic.Int64
			for op, wait := range map[string]func(context.Context, time.Time, time.Duration, func()) error{"waitReceive": b.waitReceive, "acquire": b.acquire} {
				ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
				err := wait(ctx, time.Now(), 10*time.Millisecond, func() { beats.Add(1) })
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s returned %v; want it to wait until its ctx ends", op, err)
				}
			}
			if beats.Load() < 2 {
				t.Errorf("%d heartbeats while waiting", beats.Load())
			}
			store.mu.Lock()
			reads := store.reads
			store.mu.Unlock()
			if reads < 2 {
				t.Errorf("the store was read %d times while the partitions waited", reads)
			}
		})
	}
}

// TestBreakerGivesUpWhilePeersCommit: another replica's checkpoint
// advances at every read: a partition that waited past the give-up wait
// is given up (ErrSinkUnavailable), by waitReceive and by acquire.
func TestBreakerGivesUpWhilePeersCommit(t *testing.T) {
	store := newFakePeerStore()
	committingPeer(store)
	b := breakerWithPeers(t, store)
	for op, wait := range map[string]func(context.Context, time.Time, time.Duration, func()) error{"waitReceive": b.waitReceive, "acquire": b.acquire} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a limit, not a measure
		err := wait(ctx, time.Now(), 20*time.Millisecond, nil)
		cancel()
		if !errors.Is(err, ErrSinkUnavailable) {
			t.Fatalf("%s returned %v; want ErrSinkUnavailable", op, err)
		}
	}
}

// TestBreakerWithoutPeersGivesUp: a runner built without peers (no store
// to read) gives a partition up after the wait, as before.
func TestBreakerWithoutPeersGivesUp(t *testing.T) {
	b := newBreaker(CircuitBreakerSpec{Failures: 1, ProbeInterval: time.Hour, MaxProbeInterval: time.Hour}, "c", slog.New(slog.DiscardHandler), nil)
	b.result(sinks.Transient(ErrSinkTimeout))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := b.waitReceive(ctx, time.Now(), 10*time.Millisecond, nil); !errors.Is(err, ErrSinkUnavailable) {
		t.Fatalf("waitReceive returned %v; want ErrSinkUnavailable", err)
	}
}

// committingPeer makes store show another replica whose checkpoint
// advances at every read.
func committingPeer(store *fakePeerStore) {
	store.own("1", "other", time.Now())
	seq := int64(0)
	store.onRead = func(s *fakePeerStore) {
		seq++
		s.seqs["1"] = seq
		s.owners["1"] = azeventhubs.Ownership{PartitionID: "1", OwnerID: "other", LastModifiedTime: time.Now()}
	}
}

// TestBreakerGivesUpOnEvidenceAtOnce: while another replica is seen
// committing, a partition waiting on the open breaker is given up as soon
// as the evidence is in, not after the give-up wait (an hour here): each
// second it stays, it is unread.
func TestBreakerGivesUpOnEvidenceAtOnce(t *testing.T) {
	store := newFakePeerStore()
	committingPeer(store)
	b := breakerWithPeers(t, store)
	for op, wait := range map[string]func(context.Context, time.Time, time.Duration, func()) error{"waitReceive": b.waitReceive, "acquire": b.acquire} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // a limit, not a measure
		err := wait(ctx, time.Now(), time.Hour, nil)
		cancel()
		if !errors.Is(err, ErrSinkUnavailable) {
			t.Fatalf("%s returned %v; want ErrSinkUnavailable once a peer is seen committing", op, err)
		}
	}
}

// TestBreakerGivesUpRatherThanProbe: once the open period is over, a
// caller that may give its partition up (a peer commits) does, instead
// of taking the probe: a probe over a path that answers nothing holds the
// partition for a sink timeout at every round. Without peers committing,
// the caller probes.
func TestBreakerGivesUpRatherThanProbe(t *testing.T) {
	for name, tc := range map[string]struct {
		setup func(*fakePeerStore)
		want  error
	}{
		"peer commits": {committingPeer, ErrSinkUnavailable},
		"alone":        {func(*fakePeerStore) {}, nil},
	} {
		t.Run(name, func(t *testing.T) {
			store := newFakePeerStore()
			tc.setup(store)
			b := breakerWithPeers(t, store)
			// the evidence needs two reads after the outage began
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for b.peers.lastPoll.Sub(b.outageSince) < 20*time.Millisecond && ctx.Err() == nil {
				b.peers.observe(ctx, b.outageSince)
				time.Sleep(time.Millisecond)
			}
			b.mu.Lock()
			b.until = time.Now() // the open period is over: the next caller may probe
			b.mu.Unlock()
			err := b.acquire(ctx, time.Now(), time.Hour, nil)
			if !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
				t.Fatalf("acquire returned %v; want %v", err, tc.want)
			}
			if tc.want == nil && b.state != breakerHalfOpen {
				t.Errorf("breaker state %d after the probe was taken, want half-open", b.state)
			}
			if tc.want != nil && b.state != breakerOpen {
				t.Errorf("breaker state %d after the caller gave up, want open (no probe taken)", b.state)
			}
		})
	}
}
