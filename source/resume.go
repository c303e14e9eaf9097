package source

import (
	"context"
	"fmt"
	"sort"
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
}

// ListOwnership is the store's, retried like the other calls.
func (r *resumeStore) ListOwnership(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return retryStore(ctx, r.s, "list ownership", func() ([]azeventhubs.Ownership, error) {
		return r.CheckpointStore.ListOwnership(ctx, ns, hub, cg, opts)
	})
}

// storeAttempts and storeBackoff bound the retries of a checkpoint-store
// call made by the processor. The processor stops at the first error it
// sees, and on its way out gives up every lease before the partitions have
// drained; a blip of the store (a throttled request, a dropped connection)
// must not do that.
const (
	storeAttempts = 4
	storeBackoff  = 250 * time.Millisecond
)

// retryStore runs call until it succeeds, storeAttempts are used, or ctx
// ends, doubling the wait between attempts.
func retryStore[T any](ctx context.Context, s *Source, what string, call func() (T, error)) (T, error) {
	wait := storeBackoff
	for attempt := 1; ; attempt++ {
		v, err := call()
		if err == nil || attempt == storeAttempts || ctx.Err() != nil {
			return v, err
		}
		s.log.Warn("checkpoint store call failed; retrying", "op", what, "attempt", attempt, "err", err)
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

// ClaimOwnership remembers which partitions this replica holds, so that
// ListCheckpoints works out resume positions only for those.
func (r *resumeStore) ClaimOwnership(ctx context.Context, owns []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	got, err := retryStore(ctx, r.s, "claim ownership", func() ([]azeventhubs.Ownership, error) {
		return r.CheckpointStore.ClaimOwnership(ctx, owns, opts)
	})
	if err != nil {
		return got, err
	}
	claimed := map[string]bool{}
	for _, o := range got {
		if o.OwnerID == r.s.owner {
			claimed[o.PartitionID] = true
		}
	}
	r.s.mu.Lock()
	r.s.claimed = claimed
	for id := range r.s.resolved {
		if !claimed[id] {
			delete(r.s.resolved, id)
		}
	}
	r.s.mu.Unlock()
	return got, nil
}

// ListCheckpoints returns the stored checkpoints, with the resume position in
// place of the checkpoint for every partition this replica owns. The resume
// position of a partition is worked out once per claim: asking the sink for
// its watermark while a writer of the partition is open would disturb that
// writer (a sink's Open cleans up what an earlier writer left behind).
func (r *resumeStore) ListCheckpoints(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	stored, err := retryStore(ctx, r.s, "list checkpoints", func() ([]azeventhubs.Checkpoint, error) {
		return r.CheckpointStore.ListCheckpoints(ctx, ns, hub, cg, opts)
	})
	if err != nil {
		return nil, err
	}
	byID := map[string]azeventhubs.Checkpoint{}
	for _, cp := range stored {
		byID[cp.PartitionID] = cp
	}
	r.s.mu.Lock()
	ids := make([]string, 0, len(r.s.claimed))
	cached := map[string]*azeventhubs.Checkpoint{}
	for id := range r.s.claimed {
		if c, ok := r.s.resolved[id]; ok {
			cached[id] = c
		} else {
			ids = append(ids, id)
		}
	}
	r.s.mu.Unlock()
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
	sort.Strings(ids)
	for _, id := range ids {
		var cp *azeventhubs.Checkpoint
		if c, ok := byID[id]; ok {
			cp = &c
		}
		resume, err := r.resume(ctx, id, cp)
		if err != nil {
			return nil, err
		}
		r.s.mu.Lock()
		if r.s.resolved == nil {
			r.s.resolved = map[string]*azeventhubs.Checkpoint{}
		}
		if r.s.claimed[id] {
			r.s.resolved[id] = resume
		}
		r.s.mu.Unlock()
		if resume == nil {
			delete(byID, id)
		} else {
			resume.FullyQualifiedNamespace, resume.EventHubName, resume.ConsumerGroup, resume.PartitionID = ns, hub, cg, id
			byID[id] = *resume
		}
	}
	out := make([]azeventhubs.Checkpoint, 0, len(byID))
	for _, cp := range byID {
		out = append(out, cp)
	}
	return out, nil
}

// resume returns the checkpoint partition id should start after (nil: none,
// the configured start position applies).
func (r *resumeStore) resume(ctx context.Context, id string, cp *azeventhubs.Checkpoint) (*azeventhubs.Checkpoint, error) {
	s := r.s
	var wm *sinks.Position
	if s.opts.Watermark != nil {
		var err error
		wm, err = s.opts.Watermark(ctx, id)
		if err != nil {
			err = fmt.Errorf("event hub %q partition %s: reading the sink's watermark: %w", s.hub, id, err)
			s.log.Warn("cannot resume partition", "partition", id, "err", err)
			return nil, err
		}
	}
	rp := checkpoint.Resume(cp, wm)
	switch {
	case rp.Source == checkpoint.FromStart:
		s.log.Info("partition starts", "partition", id, "from", s.startFor(id))
		return nil, nil
	case rp.SequenceNumber == nil:
		// a checkpoint with only an offset (written by another tool): the
		// SDK resumes after it; it cannot be checked by sequence number.
		s.log.Info("partition resumes", "partition", id, "from", "checkpoint offset", "offset", deref(rp.Offset))
		return &azeventhubs.Checkpoint{Offset: rp.Offset}, nil
	}
	pos := &sinks.Position{SequenceNumber: *rp.SequenceNumber, Offset: deref(rp.Offset)}
	from := rp.Source.String()
	props, err := s.client.GetPartitionProperties(ctx, id, nil)
	if err != nil {
		err = fmt.Errorf("event hub %q partition %s: checking the resume position: %w", s.hub, id, err)
		s.log.Warn("cannot resume partition", "partition", id, "err", err)
		return nil, err
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
	s.log.Info("partition resumes", "partition", id, "from", from, "after_seq", checked.SequenceNumber)
	seq := checked.SequenceNumber
	out := &azeventhubs.Checkpoint{SequenceNumber: &seq}
	if checked.Offset != "" {
		off := checked.Offset
		out.Offset = &off
	}
	return out, nil
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
