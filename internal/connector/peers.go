package connector

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// peerStore is what peers reads of the connector's checkpoint store.
// azeventhubs.CheckpointStore provides it.
type peerStore interface {
	ListOwnership(ctx context.Context, ns, hub, group string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error)
	ListCheckpoints(ctx context.Context, ns, hub, group string, opts *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error)
}

// peers answers, while the connector's circuit breaker is open, whether
// another replica of the connector commits: whether a partition that
// another owner holds under a live lease saw its checkpoint advance
// within the ownership expiration. That is the evidence that the sink
// answers for someone else, and the only one every replica can read (the
// checkpoint store they share). Without it, a partition waiting on the
// open breaker is not given up: when no replica reaches the sink, moving
// partitions around helps no one.
//
// It reads the store only when asked (observe, which the breaker's
// waiters call while the breaker is open, and the partitions while Event
// Hubs is not reached), at most once per every, each read bounded by
// timeout. A failed read adds no evidence. An advance counts for an outage
// only when both reads that show it started after the outage began, so an
// advance made while this replica's sink (or source) was healthy is not
// taken for one made during the outage; two outages at once (the sink's
// and Event Hubs') share the reads without resetting each other. Safe for
// concurrent use.
type peers struct {
	store          peerStore
	ns, hub, group string
	owner          string        // this replica's owner ID, whose partitions are not evidence
	expiration     time.Duration // a lease older than this is dead; an advance older than this is stale
	every, timeout time.Duration // the spacing of reads; the bound of one read
	log            *slog.Logger
	now            func() time.Time

	mu       sync.Mutex // guards the fields below
	polling  bool       // a read is under way
	lastPoll time.Time  // when the last read started
	seen     map[string]peerCheckpoint
	seenAt   time.Time // when the read that saw seen started
	advanced time.Time // when the read that saw the last advance started (zero: none)
	baseline time.Time // when the read before it started: the advance happened after
	lastErr  error     // the last read's failure, nil when it succeeded
}

// peerCheckpoint is what the last read saw of one partition.
type peerCheckpoint struct {
	owner string
	seq   int64 // -1: no checkpoint
}

// newPeers returns a peers reading store for the connector's hub and
// consumer group in namespace ns; owner is this replica's owner ID.
func newPeers(store peerStore, ns, hub, group, owner string, expiration, every time.Duration, log *slog.Logger) *peers {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &peers{store: store, ns: ns, hub: hub, group: group, owner: owner,
		expiration: expiration, every: every, timeout: min(every, expiration/4),
		log: log, now: time.Now}
}

// observe reads the store when a read is due for the outage that began at
// epoch (at once when no read started since then), and returns without
// reading otherwise, or when another caller is reading. It blocks for at
// most the read's timeout. Call it without holding any lock of the breaker.
func (p *peers) observe(ctx context.Context, epoch time.Time) {
	p.mu.Lock()
	now := p.now()
	due := p.lastPoll.IsZero() || p.lastPoll.Before(epoch) || now.Sub(p.lastPoll) >= p.every
	if p.polling || !due {
		p.mu.Unlock()
		return
	}
	p.polling, p.lastPoll = true, now
	p.mu.Unlock()

	owners, cps, err := p.read(ctx)

	p.mu.Lock()
	defer p.mu.Unlock()
	p.polling = false
	p.lastErr = err
	if err != nil {
		p.log.Debug("reading the checkpoint store for other replicas' progress failed; no evidence that the sink answers elsewhere", "error", err)
		return
	}
	p.record(owners, cps, now)
}

// read lists the connector's leases and checkpoints within the timeout.
func (p *peers) read(ctx context.Context) ([]azeventhubs.Ownership, []azeventhubs.Checkpoint, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	owners, err := p.store.ListOwnership(ctx, p.ns, p.hub, p.group, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("listing ownership: %w", err)
	}
	cps, err := p.store.ListCheckpoints(ctx, p.ns, p.hub, p.group, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	return owners, cps, nil
}

// record compares a read that started at now with the previous one. A
// partition counts as advanced when the same other owner held it under a
// live lease at both reads and its checkpoint's sequence number grew in
// between. p.mu is held.
func (p *peers) record(owners []azeventhubs.Ownership, cps []azeventhubs.Checkpoint, now time.Time) {
	seqs := make(map[string]int64, len(cps))
	for _, c := range cps {
		if c.SequenceNumber != nil {
			seqs[c.PartitionID] = *c.SequenceNumber
		}
	}
	seen := make(map[string]peerCheckpoint, len(owners))
	for _, o := range owners {
		if o.OwnerID == "" || o.OwnerID == p.owner || now.Sub(o.LastModifiedTime) >= p.expiration {
			continue // released, ours, or a dead lease
		}
		seq, ok := seqs[o.PartitionID]
		if !ok {
			seq = -1
		}
		cur := peerCheckpoint{owner: o.OwnerID, seq: seq}
		if prev, ok := p.seen[o.PartitionID]; ok && prev.owner == cur.owner && cur.seq > prev.seq {
			p.advanced, p.baseline = now, p.seenAt
		}
		seen[o.PartitionID] = cur
	}
	p.seen, p.seenAt = seen, now
}

// progressing reports whether, in the outage that began at epoch, another
// owner's checkpoint advanced within the ownership expiration: between two
// reads that both started after epoch.
func (p *peers) progressing(epoch time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.advanced.IsZero() && !p.baseline.Before(epoch) && p.now().Sub(p.advanced) < p.expiration
}

// untilRead returns how long until the next read is due: what a waiter
// may sleep before calling observe again.
func (p *peers) untilRead() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polling {
		return p.every
	}
	if p.lastPoll.IsZero() {
		return time.Millisecond
	}
	return max(p.every-p.now().Sub(p.lastPoll), time.Millisecond)
}

// lastError returns the failure of the last read, nil when it succeeded.
func (p *peers) lastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}
