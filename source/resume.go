package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/sinks"
)

// resumeStore is the checkpoint store the SDK processor sees. The processor
// reads checkpoints only to choose where a newly claimed partition starts;
// resumeStore answers with the resume position instead: the later of the
// stored checkpoint and the sink's watermark, checked against what the
// partition still holds. Every other call goes to the real store.
type resumeStore struct {
	azeventhubs.CheckpointStore
	s    *Source
	fail func(error)
	// keepLeases is set while the processor is restarted (not stopped):
	// its release of every lease on the way out is then not written.
	keepLeases atomic.Bool

	rndMu sync.Mutex // guards rnd
	rnd   *rand.Rand // the balanced strategy's choices among equals
}

// ListOwnership is the store's, retried like the other calls; the listing
// is kept for the claim of the same round (plan) and for Checkpoint.
func (r *resumeStore) ListOwnership(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	owns, err := retryStore(ctx, r.s, "list ownership", func() ([]azeventhubs.Ownership, error) {
		return r.CheckpointStore.ListOwnership(ctx, ns, hub, cg, opts)
	})
	if err == nil {
		r.s.noteListing(owns)
	}
	return owns, err
}

// storeAttempts and storeBackoff bound the retries of a checkpoint-store
// call made by the processor, and of each step of working out a resume
// position. The processor stops at the first error it sees, and on its way
// out gives up every lease before the partitions have drained; a blip of
// the store (a throttled request, a dropped connection) must not do that.
const (
	storeAttempts = 4
	storeBackoff  = 250 * time.Millisecond
)

// resumeParallelism bounds how many resume positions of one claim are
// worked out at once (sink watermark reads, partition-properties calls).
const resumeParallelism = 8

// retryStore runs call until it succeeds, fails with an error permanent
// says is not worth retrying (nil: every error is), storeAttempts are used,
// or ctx ends, doubling the wait between attempts.
func retryStore[T any](ctx context.Context, s *Source, what string, call func() (T, error), permanent ...func(error) bool) (T, error) {
	wait := storeBackoff
	for attempt := 1; ; attempt++ {
		v, err := call()
		if err == nil || attempt == storeAttempts || ctx.Err() != nil || (len(permanent) > 0 && permanent[0](err)) {
			return v, err
		}
		s.log.Warn("call failed; retrying", "op", what, "attempt", attempt, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
		wait *= 2
	}
}

// ClaimOwnership remembers which partitions this replica holds (with their
// leases, so that a partition can be given up), so that ListCheckpoints
// works out resume positions only for those and the watchdog knows what
// must be running. While the source restarts its processor, the old
// processor's release of every lease is not written: the new processor
// renews the same leases under the same owner ID, and no other replica
// should take a partition for the few seconds the restart lasts. When the
// processor stops, its release is tried once, within closeTimeout: freed
// leases let the next owner start at once, but an unrenewed lease expires
// anyway, and retrying a store that does not answer would hold the stop of
// the process far past its drain timeout.
func (r *resumeStore) ClaimOwnership(ctx context.Context, owns []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	var (
		got []azeventhubs.Ownership
		err error
	)
	switch {
	case releasesAll(owns) && r.keepLeases.Load():
		return nil, nil
	case releasesAll(owns):
		rctx, cancel := context.WithTimeout(ctx, closeTimeout)
		defer cancel()
		got, _, err = claimEach(rctx, r.CheckpointStore, owns, opts)
	default:
		if owns = r.s.holdClaims(r.s.dropGivenUp(r.plan(ctx, owns))); len(owns) == 0 {
			return nil, nil
		}
		// The lease of what comes back runs from the first attempt's
		// send at the latest; an attempt that hangs is bounded so that a
		// renewal is tried again before the lease runs out. An attempt
		// that fails is retried for the leases it left unwritten.
		sent := time.Now()
		pending := owns
		_, err = retryStore(ctx, r.s, "claim ownership", func() (struct{}, error) {
			actx, cancel := context.WithTimeout(ctx, r.s.opts.LoadBalancing.UpdateInterval)
			defer cancel()
			won, failed, err := claimEach(actx, r.CheckpointStore, pending, opts)
			got, pending = append(got, won...), failed
			return struct{}{}, err
		})
		if err == nil {
			r.s.noteRenewed(got, sent)
		}
	}
	if err != nil {
		return got, err
	}
	r.s.noteClaims(got)
	return got, nil
}

// holdClaims drops from owns the partitions this replica does not own
// already while Options.HoldClaims says so: the renewals go on.
func (s *Source) holdClaims(owns []azeventhubs.Ownership) []azeventhubs.Ownership {
	if s.opts.HoldClaims == nil || !s.opts.HoldClaims() {
		return owns
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := owns[:0:0]
	var held []string
	for _, o := range owns {
		if _, ok := s.claimed[o.PartitionID]; ok {
			kept = append(kept, o)
		} else {
			held = append(held, o.PartitionID)
		}
	}
	if len(held) > 0 {
		s.log.Info("not claiming partitions while the sink or Event Hubs is not reached", "partitions", held)
	}
	return kept
}

// noteRenewed records sent as the time the leases of this replica in got
// were last renewed.
func (s *Source) noteRenewed(got []azeventhubs.Ownership, sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.renewed == nil {
		s.renewed = map[string]time.Time{}
	}
	for _, o := range got {
		if o.OwnerID == s.owner {
			s.renewed[o.PartitionID] = sent
		}
	}
}

// releasesAll reports whether owns gives every listed lease up (the
// processor's way out).
func releasesAll(owns []azeventhubs.Ownership) bool {
	for _, o := range owns {
		if o.OwnerID != "" {
			return false
		}
	}
	return true
}

// ListCheckpoints returns the stored checkpoints, with the resume position in
// place of the checkpoint for every partition this replica owns. The resume
// position of a partition is worked out once per claim: asking the sink for
// its watermark while a writer of the partition is open would disturb that
// writer (a sink's Open cleans up what an earlier writer left behind).
//
// It never returns an error. The SDK's processor registers a newly claimed
// partition as running before it asks for checkpoints and never unregisters
// it when the call fails, so that one error would leave every partition of
// the claim owned and unread for as long as the lease is renewed. A
// partition whose resume position cannot be worked out (after retries) is
// marked unresolved instead: Run closes its client at once and gives its
// lease up, and the next claim tries again.
func (r *resumeStore) ListCheckpoints(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	stored, listErr := retryStore(ctx, r.s, "list checkpoints", func() ([]azeventhubs.Checkpoint, error) {
		if r.s.injectListErrs.Add(-1) >= 0 {
			return nil, errors.New("injected checkpoint store failure")
		}
		return r.CheckpointStore.ListCheckpoints(ctx, ns, hub, cg, opts)
	})
	if listErr != nil && r.s.passListErrs.Load() {
		// test seam: let the SDK see the error, to prove the watchdog
		return nil, listErr
	}
	byID := r.usableCheckpoints(stored)
	ids, cached := r.claimRound(byID, listErr)
	applyCached(byID, cached)
	sort.Strings(ids)
	// The processor renews no lease until every claim of this round has a
	// start position: the work is bounded well inside the ownership
	// expiration, and what is not done by then is tried at the next claim.
	bctx, cancel := context.WithTimeout(ctx, r.s.opts.LoadBalancing.OwnershipExpiration/3)
	defer cancel()
	if listErr != nil {
		for _, id := range ids {
			r.s.unresolve(id, fmt.Errorf("event hub %q partition %s: listing checkpoints: %w", r.s.hub, id, listErr))
		}
		ids = nil
	}
	results := r.resumeAll(bctx, ids, byID)
	r.applyResumed(ctx, ns, hub, cg, ids, results, byID)
	out := make([]azeventhubs.Checkpoint, 0, len(byID))
	for _, cp := range byID {
		out = append(out, cp)
	}
	r.s.noteStarts(out)
	return out, nil
}

// usableCheckpoints indexes the stored checkpoints by partition, leaving
// out those the processor would refuse, so that such a partition starts
// from the start position instead of being trapped.
func (r *resumeStore) usableCheckpoints(stored []azeventhubs.Checkpoint) map[string]azeventhubs.Checkpoint {
	byID := map[string]azeventhubs.Checkpoint{}
	for _, cp := range stored {
		if cp.SequenceNumber == nil && cp.Offset == nil {
			// The processor refuses such a checkpoint after registering the
			// partition (the same trap as an error); the start position
			// applies, as for no checkpoint.
			r.s.log.Warn("checkpoint without offset or sequence number ignored", "partition", cp.PartitionID)
			continue
		}
		byID[cp.PartitionID] = cp
	}
	return byID
}

// claimRound reads, under the source's lock, which claimed partitions
// already have a resume position (cached) and which still need one (ids,
// unsorted), and records the stored checkpoint of each claimed partition
// when the list succeeded. It holds the lock for the reads alone, so no
// store or sink call happens under it.
func (r *resumeStore) claimRound(byID map[string]azeventhubs.Checkpoint, listErr error) (ids []string, cached map[string]*azeventhubs.Checkpoint) {
	r.s.mu.Lock()
	ids = make([]string, 0, len(r.s.claimed))
	cached = map[string]*azeventhubs.Checkpoint{}
	r.s.stored = map[string]int64{}
	for id := range r.s.claimed {
		if listErr == nil {
			r.s.stored[id] = storedSeq(byID, id)
		}
		if c, ok := r.s.resolved[id]; ok {
			cached[id] = c
		} else {
			ids = append(ids, id)
		}
	}
	r.s.mu.Unlock()
	return ids, cached
}

// applyCached puts the resume positions worked out at an earlier claim in
// place of the stored checkpoints, unless a stored checkpoint written since
// is later.
func applyCached(byID map[string]azeventhubs.Checkpoint, cached map[string]*azeventhubs.Checkpoint) {
	for id, c := range cached {
		// a stored checkpoint written since (by a partition this replica
		// read, or by the owner before) wins when it is later
		if stored, ok := byID[id]; ok && (c == nil || laterCheckpoint(stored, *c)) {
			continue
		}
		if c == nil {
			delete(byID, id)
		} else {
			byID[id] = *c
		}
	}
}

// resumeResult is what working out one partition's resume position gave.
type resumeResult struct {
	resume *azeventhubs.Checkpoint
	opened opened
	err    error
}

// resumeAll works out the resume positions of ids, at most
// resumeParallelism at a time, and waits for all of them. The partitions of
// a claim are worked out side by side, so that one slow partition does not
// use the whole budget of the others.
func (r *resumeStore) resumeAll(bctx context.Context, ids []string, byID map[string]azeventhubs.Checkpoint) []resumeResult {
	results := make([]resumeResult, len(ids))
	sem := make(chan struct{}, resumeParallelism)
	var wg sync.WaitGroup
	for i, id := range ids {
		var cp *azeventhubs.Checkpoint
		if c, ok := byID[id]; ok {
			cp = &c
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i].resume, results[i].opened, results[i].err = r.resume(bctx, id, cp)
		}()
	}
	wg.Wait()
	return results
}

// applyResumed records each worked-out resume position for the claim (so
// the next round of the same claim reuses it), keeps the writer the sink
// opened to find it, and puts it in byID in place of the stored
// checkpoint. A partition whose position could not be worked out is
// marked unresolved.
func (r *resumeStore) applyResumed(ctx context.Context, ns, hub, cg string, ids []string, results []resumeResult, byID map[string]azeventhubs.Checkpoint) {
	for i, id := range ids {
		resume, err := results[i].resume, results[i].err
		if err != nil {
			// byID keeps the stored checkpoint (or none): a valid position
			// for the client the processor opens and Run closes unread.
			r.s.unresolve(id, err)
			continue
		}
		r.s.mu.Lock()
		if r.s.resolved == nil {
			r.s.resolved = map[string]*azeventhubs.Checkpoint{}
		}
		if _, ok := r.s.claimed[id]; ok {
			r.s.resolved[id] = resume
		}
		delete(r.s.unresolved, id)
		r.s.mu.Unlock()
		if results[i].opened.v != nil {
			r.s.keepOpened(context.WithoutCancel(ctx), id, results[i].opened)
		}
		if resume == nil {
			delete(byID, id)
		} else {
			resume.FullyQualifiedNamespace, resume.EventHubName, resume.ConsumerGroup, resume.PartitionID = ns, hub, cg, id
			byID[id] = *resume
		}
	}
}

// resume returns the checkpoint partition id should start after (nil: none,
// the configured start position applies), and what Options.Claim opened
// to read the sink's watermark (nothing on error: it is closed).
func (r *resumeStore) resume(ctx context.Context, id string, cp *azeventhubs.Checkpoint) (*azeventhubs.Checkpoint, opened, error) {
	o, err := r.watermark(ctx, id)
	if err != nil {
		return nil, opened{}, err
	}
	resume, err := r.resumeAfter(ctx, id, cp, o.wm)
	if err != nil {
		r.s.closeOpenedValue(context.WithoutCancel(ctx), id, o)
		return nil, opened{}, err
	}
	return resume, o, nil
}

// watermark reads the sink's committed position of partition id through
// Options.Claim (keeping what it opened) or Options.Watermark.
func (r *resumeStore) watermark(ctx context.Context, id string) (opened, error) {
	s := r.s
	var (
		o   opened
		err error
	)
	switch {
	case s.opts.Claim != nil:
		o, err = retryStore(ctx, s, "open the sink's writer", func() (opened, error) {
			wm, v, err := s.opts.Claim(ctx, id)
			return opened{v: v, wm: wm}, err
		}, isPermanentSinkError)
	case s.opts.Watermark != nil:
		o.wm, err = retryStore(ctx, s, "read the sink's watermark", func() (*sinks.Position, error) {
			return s.opts.Watermark(ctx, id)
		}, isPermanentSinkError)
	}
	if err != nil {
		err = fmt.Errorf("event hub %q partition %s: reading the sink's watermark: %w", s.hub, id, err)
		if isPermanentSinkError(err) && ctx.Err() == nil {
			// the sink refuses for good (a table that does not match,
			// credentials): the connector cannot serve any partition
			r.fail(err)
		}
		return opened{}, err
	}
	return o, nil
}

// resumeAfter works out where partition id resumes from its stored
// checkpoint cp and the sink's watermark wm.
func (r *resumeStore) resumeAfter(ctx context.Context, id string, cp *azeventhubs.Checkpoint, wm *sinks.Position) (*azeventhubs.Checkpoint, error) {
	s := r.s
	rp := checkpoint.Resume(cp, wm)
	switch {
	case rp.FromStart():
		s.noteStart(id, "from", s.startFor(id))
		return nil, nil
	case rp.SequenceNumber == nil:
		// a checkpoint with only an offset (written by another tool): the
		// SDK resumes after it; it cannot be checked by sequence number.
		s.noteStart(id, "from", "checkpoint offset", "offset", deref(rp.Offset))
		return &azeventhubs.Checkpoint{Offset: rp.Offset}, nil
	}
	pos := &sinks.Position{SequenceNumber: *rp.SequenceNumber, Offset: deref(rp.Offset)}
	from := rp.Source.String()
	props, err := retryStore(ctx, s, "read partition properties", func() (azeventhubs.PartitionProperties, error) {
		return s.PartitionProperties(ctx, id)
	})
	if err != nil {
		return nil, fmt.Errorf("event hub %q partition %s: checking the resume position: %w", s.hub, id, err)
	}
	pr := partitionRange{
		Begin: props.BeginningSequenceNumber,
		Last:  props.LastEnqueuedSequenceNumber,
		Empty: props.IsEmpty,
	}
	checked, problem, err := checkResume(id, *pos, pr, s.policy)
	if err == nil {
		err = checkWatermark(id, wm, pr)
	}
	if err != nil {
		err = fmt.Errorf("event hub %q consumer group %q: %w", s.hub, s.opts.ConsumerGroup, err)
		r.fail(err)
		return nil, err
	}
	if problem != "" {
		s.log.Warn("invalid resume position replaced", "partition", id, "problem", problem, "policy", string(s.policy), "resume_after_seq", checked.SequenceNumber)
		seq := checked.SequenceNumber
		return &azeventhubs.Checkpoint{SequenceNumber: &seq}, nil
	}
	s.noteStart(id, "from", from, "after_seq", checked.SequenceNumber)
	seq := checked.SequenceNumber
	out := &azeventhubs.Checkpoint{SequenceNumber: &seq}
	if checked.Offset != "" {
		off := checked.Offset
		out.Offset = &off
	}
	return out, nil
}

// isPermanentSinkError reports whether a sink error is worth no retry: not
// marked transient and not a deadline or cancellation.
func isPermanentSinkError(err error) bool {
	return !sinks.IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// storedSeq returns the sequence number of partition id's checkpoint in
// byID, -1 when it has none; one with only an offset counts as being at
// the end of the partition, as no position is known to be past it.
func storedSeq(byID map[string]azeventhubs.Checkpoint, id string) int64 {
	cp, ok := byID[id]
	switch {
	case !ok:
		return -1
	case cp.SequenceNumber == nil:
		return math.MaxInt64
	}
	return *cp.SequenceNumber
}

// laterCheckpoint reports whether a is at or after b by sequence number.
func laterCheckpoint(a, b azeventhubs.Checkpoint) bool {
	return a.SequenceNumber != nil && (b.SequenceNumber == nil || *a.SequenceNumber >= *b.SequenceNumber)
}

func (s *Source) startFor(id string) string {
	if v, ok := s.opts.StartPartitions[id]; ok {
		return v
	}
	return s.opts.Start
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
