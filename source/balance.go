package source

import (
	"context"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// claimParallelism bounds how many leases one claim round writes at once.
// The SDK's Blob store writes a round's leases one after another: at 1,024
// partitions and 10 to 20 ms a request, the renewals alone would outlast
// the update interval.
const claimParallelism = 32

// planBalanced is the balanced strategy: which leases this replica (me)
// claims in a round, given the listing the round began with and the hub's
// partitions. It keeps its live leases; takes free partitions (never
// owned, released or expired) at once up to its fair share; and, while
// still below it, takes what live replicas hold above it, one partition
// at a time from the fullest, never more than this replica lacks.
//
// The fair share counts the replicas that hold a live lease, this one
// included: P partitions over N replicas is P/N each, one more for P%N of
// them. A replica below P/N takes what it lacks in one round, so that N
// replicas are balanced in the round of the last one to start, not one
// partition per round (32 rounds for 32 partitions). A replica never
// takes an owner below the share, so two replicas starting in the same
// round overshoot by at most what they both took from one owner: the
// round after, the one left short takes its difference from the one
// above, and nothing moves once every replica holds P/N or P/N+1.
//
// template carries the namespace, hub and consumer group for partitions
// the listing does not hold yet.
func planBalanced(listing []azeventhubs.Ownership, ids []string, me string, expiration time.Duration, now time.Time, template azeventhubs.Ownership, rnd *rand.Rand) []azeventhubs.Ownership {
	byID := make(map[string]azeventhubs.Ownership, len(listing))
	for _, o := range listing {
		byID[o.PartitionID] = o
	}
	all := append([]string(nil), ids...)
	for id := range byID {
		if !slices.Contains(ids, id) {
			all = append(all, id)
		}
	}
	sort.Strings(all)

	var (
		mine, free []azeventhubs.Ownership
		claim      []azeventhubs.Ownership
	)
	others := map[string][]azeventhubs.Ownership{}
	for _, id := range all {
		o, ok := byID[id]
		switch {
		case !ok:
			o = template
			o.PartitionID, o.ETag, o.LastModifiedTime = id, nil, time.Time{}
			free = append(free, o)
		case o.OwnerID == "" || now.Sub(o.LastModifiedTime) >= expiration:
			free = append(free, o)
		case o.OwnerID == me:
			mine = append(mine, o)
		default:
			others[o.OwnerID] = append(others[o.OwnerID], o)
		}
	}

	replicas := len(others) + 1
	share := len(all) / replicas
	extra := len(all)%replicas > 0
	most := share // the most a replica may hold
	if extra {
		most++
	}
	for _, owned := range others {
		rnd.Shuffle(len(owned), func(i, j int) { owned[i], owned[j] = owned[j], owned[i] })
	}
	// fullest returns the replica holding the most partitions (the first
	// by name among equals), so that takings level the replicas down.
	fullest := func() string {
		best := ""
		for owner, owned := range others {
			if best == "" || len(owned) > len(others[best]) || len(owned) == len(others[best]) && owner < best {
				best = owner
			}
		}
		return best
	}
	// steal takes one partition of the fullest replica while it holds
	// more than above.
	steal := func(above int) bool {
		owner := fullest()
		owned := others[owner]
		if owner == "" || len(owned) <= above {
			return false
		}
		claim = append(claim, owned[len(owned)-1])
		others[owner] = owned[:len(owned)-1]
		return true
	}

	claim = append(claim, mine...)
	rnd.Shuffle(len(free), func(i, j int) { free[i], free[j] = free[j], free[i] })
	// Up to the share: free partitions, then partitions of replicas above
	// the share (while this one is below it, some replica is above).
	for len(claim) < share && len(free) > 0 {
		claim, free = append(claim, free[0]), free[1:]
	}
	for len(claim) < share && steal(share) {
	}
	// One more when partitions are left over: a free one, or one of a
	// replica above the most (the SDK's rule).
	if extra && len(claim) == share {
		if len(free) > 0 {
			claim = append(claim, free[0])
		} else {
			steal(most)
		}
	}
	for i := range claim {
		claim[i].OwnerID = me
	}
	return claim
}

// noteListing keeps the ownership listing a claim round began with: the
// balanced strategy plans from it, and Checkpoint names a partition's new
// owner from it.
func (s *Source) noteListing(owns []azeventhubs.Ownership) {
	listed := make(map[string]azeventhubs.Ownership, len(owns))
	for _, o := range owns {
		listed[o.PartitionID] = o
	}
	s.mu.Lock()
	s.listed = listed
	s.mu.Unlock()
}

// lastListing returns the listing of the last claim round.
func (s *Source) lastListing() []azeventhubs.Ownership {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]azeventhubs.Ownership, 0, len(s.listed))
	for _, o := range s.listed {
		out = append(out, o)
	}
	return out
}

// ownerSeen reports whether this replica's last claim round kept partition
// id; when it did not, owner names the owner the round listed ("unknown"
// when none).
func (s *Source) ownerSeen(id string) (owner string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.claimed[id]; ok {
		return s.owner, true
	}
	if o, ok := s.listed[id]; ok && o.OwnerID != "" && o.OwnerID != s.owner {
		return o.OwnerID, false
	}
	return "unknown", false
}

// plan replaces the SDK processor's choice of leases with the balanced
// strategy's (planBalanced) over the listing the round began with. The
// SDK's own balanced strategy claims one partition per round, so that a
// lone replica needed 32 update intervals to own 32 partitions. The greedy
// strategy keeps the SDK's choice.
func (r *resumeStore) plan(ctx context.Context, proposed []azeventhubs.Ownership) []azeventhubs.Ownership {
	s := r.s
	if !strings.EqualFold(s.opts.LoadBalancing.Strategy, string(azeventhubs.ProcessorStrategyBalanced)) || len(proposed) == 0 {
		return proposed
	}
	template := proposed[0]
	ids := r.partitionIDs(ctx, proposed)
	r.rndMu.Lock()
	defer r.rndMu.Unlock()
	if r.rnd == nil {
		r.rnd = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return planBalanced(s.lastListing(), ids, s.owner, s.opts.LoadBalancing.OwnershipExpiration, time.Now(), template, r.rnd)
}

// partitionIDs returns the hub's partitions, read again at every round so
// that partitions added to a running hub (Premium and Dedicated allow it)
// are claimed at the next round (the SDK's processor reads them once, at
// its start); the last list read when the read fails. Any partition the
// processor proposes is added.
func (r *resumeStore) partitionIDs(ctx context.Context, proposed []azeventhubs.Ownership) []string {
	s := r.s
	rctx, cancel := context.WithTimeout(ctx, s.opts.LoadBalancing.UpdateInterval/4)
	ids, err := s.props.PartitionIDs(rctx)
	cancel()
	s.mu.Lock()
	if err == nil && len(ids) > 0 {
		s.partitions = ids
	} else {
		ids = s.partitions
	}
	s.mu.Unlock()
	ids = append([]string(nil), ids...)
	for _, o := range proposed {
		if !slices.Contains(ids, o.PartitionID) {
			ids = append(ids, o.PartitionID)
		}
	}
	return ids
}

// claimEach writes the leases of owns, claimParallelism at a time, each
// through its own call to the store (the SDK's store writes a call's
// leases in turn). It returns the leases won, and the first error with
// the leases it left unwritten: the caller retries only those. A lease
// another replica wrote first is not an error: it is simply not won.
func claimEach(ctx context.Context, store azeventhubs.CheckpointStore, owns []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) (won, failed []azeventhubs.Ownership, err error) {
	if len(owns) <= 1 {
		won, err = store.ClaimOwnership(ctx, owns, opts)
		if err != nil {
			return nil, owns, err
		}
		return won, nil, nil
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, claimParallelism)
	)
	for _, o := range owns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			got, cerr := store.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, opts)
			mu.Lock()
			defer mu.Unlock()
			if cerr != nil {
				failed = append(failed, o)
				if err == nil {
					err = cerr
				}
				return
			}
			won = append(won, got...)
		}()
	}
	wg.Wait()
	return won, failed, err
}
