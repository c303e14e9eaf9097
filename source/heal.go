package source

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// Liveness: every partition this replica owns is read, or the source knows
// why not and says so. The SDK's processor can keep a partition registered
// as running, and its lease renewed, without ever handing it out (a claim
// whose start position failed); a handler can stop receiving (a call that
// never returns). The watchdog looks for both once per update interval and
// heals them, whatever the cause.

// Heal reasons, as passed to Options.OnHeal.
const (
	// healUnread: a partition stayed owned with no handler for longer than
	// the ownership expiration, and the processor either finished a round
	// of claims without handing it out or made no progress at all for that
	// long; the processor is restarted.
	healUnread = "unread"
	// healSilent: a handler neither received nor sent a heartbeat for
	// longer than the ownership expiration plus the batch wait; its context
	// is cancelled, so that it drains and the partition is reopened.
	healSilent = "silent"
	// healProcessorFailed: the processor's load-balancing loop failed; the
	// handlers drain and a new processor starts after a backoff.
	healProcessorFailed = "processor_failed"
)

// noteClaims records the partitions this replica owns after a claim.
func (s *Source) noteClaims(got []azeventhubs.Ownership) {
	now := time.Now()
	claimed := map[string]azeventhubs.Ownership{}
	var gone []string
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		s.closeOpened(ctx, gone)
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range got {
		if o.OwnerID == s.owner && !s.givenUpLocked(o.PartitionID, now) {
			claimed[o.PartitionID] = o
		}
	}
	s.claimed = claimed
	for id := range s.resolved {
		if _, ok := claimed[id]; !ok {
			delete(s.resolved, id)
		}
	}
	for id := range s.renewed {
		if _, ok := claimed[id]; !ok {
			delete(s.renewed, id)
		}
	}
	for id := range s.opened {
		if _, ok := claimed[id]; !ok {
			gone = append(gone, id)
		}
	}
	for id := range s.idleSince {
		if _, ok := claimed[id]; !ok {
			delete(s.idleSince, id)
			delete(s.idleRounds, id)
			delete(s.reported, id)
		}
	}
	if s.idleSince == nil {
		s.idleSince = map[string]time.Time{}
	}
	if s.idleRounds == nil {
		s.idleRounds = map[string]int{}
	}
	s.progress = now
	for id := range claimed {
		if s.running[id] != nil {
			continue
		}
		if _, ok := s.idleSince[id]; !ok {
			s.idleSince[id] = now
		}
		s.idleRounds[id]++
	}
}

// unresolve records that the resume position of partition id could not be
// worked out for the current claim.
func (s *Source) unresolve(id string, err error) {
	s.mu.Lock()
	if s.unresolved == nil {
		s.unresolved = map[string]error{}
	}
	s.unresolved[id] = err
	delete(s.resolved, id)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.closeOpened(ctx, []string{id})
}

// noteStart records where partition id starts (from=earliest, or from=sink
// watermark after_seq=N), for the "partition claimed" line that follows the
// claim: logged there, the position reads after the claim, not before it.
// It is also logged at debug level now.
func (s *Source) noteStart(id string, attrs ...any) {
	s.log.Debug("partition resume position", append([]any{"partition", id}, attrs...)...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.startAttrs == nil {
		s.startAttrs = map[string][]any{}
	}
	s.startAttrs[id] = attrs
}

// takeStart returns (and forgets) what noteStart recorded for id.
func (s *Source) takeStart(id string) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	attrs := s.startAttrs[id]
	delete(s.startAttrs, id)
	return attrs
}

// takeUnresolved returns (and forgets) why partition id has no resume
// position, or nil when it has one.
func (s *Source) takeUnresolved(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.unresolved[id]
	delete(s.unresolved, id)
	return err
}

// release gives the lease of partition id up (best effort: an unrenewed
// lease expires anyway). A write that lost the race with a renewal the
// processor sent meanwhile (the lease's etag moved) is tried again on the
// lease as it is now, while it is still this replica's.
func (s *Source) release(ctx context.Context, id string) {
	s.mu.Lock()
	o, ok := s.claimed[id]
	delete(s.claimed, id)
	delete(s.renewed, id)
	delete(s.idleSince, id)
	delete(s.idleRounds, id)
	delete(s.reported, id)
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	for range releaseAttempts {
		o.OwnerID = ""
		got, err := s.opts.Store.ClaimOwnership(ctx, []azeventhubs.Ownership{o}, nil)
		if err != nil {
			s.log.Debug("giving the lease up", "partition", id, "err", err)
			return
		}
		if len(got) == 1 {
			return
		}
		owns, err := s.opts.Store.ListOwnership(ctx, o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup, nil)
		if err != nil {
			s.log.Debug("giving the lease up: listing the leases", "partition", id, "err", err)
			return
		}
		i := slices.IndexFunc(owns, func(x azeventhubs.Ownership) bool { return x.PartitionID == id })
		if i < 0 || owns[i].OwnerID != s.owner {
			return
		}
		o = owns[i]
	}
	s.log.Debug("giving the lease up: the lease kept changing", "partition", id)
}

// releaseAttempts bounds release's writes of one lease.
const releaseAttempts = 3

// giveUpLease releases partition id for a replica that can serve it (a
// handler's ErrGiveUp). For an ownership expiration this replica neither
// renews nor claims it: a renewal of the processor's that was sent before
// the release and answered after would otherwise record the lease as this
// replica's again (noteClaims), and every later round renew it, leaving
// the partition owned here with no handler until the lease ran out of
// renewals some other way.
func (s *Source) giveUpLease(ctx context.Context, id string) {
	s.mu.Lock()
	if s.givenUp == nil {
		s.givenUp = map[string]time.Time{}
	}
	s.givenUp[id] = time.Now()
	s.mu.Unlock()
	s.release(ctx, id)
}

// givenUpLocked reports whether partition id was given up within the last
// ownership expiration, forgetting older give-ups. The caller holds s.mu.
func (s *Source) givenUpLocked(id string, now time.Time) bool {
	at, ok := s.givenUp[id]
	if ok && now.Sub(at) >= s.opts.LoadBalancing.OwnershipExpiration {
		delete(s.givenUp, id)
		return false
	}
	return ok
}

// dropGivenUp removes from owns the partitions given up within the last
// ownership expiration (giveUpLease).
func (s *Source) dropGivenUp(owns []azeventhubs.Ownership) []azeventhubs.Ownership {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.givenUp) == 0 {
		return owns
	}
	now := time.Now()
	return slices.DeleteFunc(slices.Clone(owns), func(o azeventhubs.Ownership) bool { return s.givenUpLocked(o.PartitionID, now) })
}

// markRunning records that p's handler starts.
func (s *Source) markRunning(p *Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[string]*Partition{}
	}
	s.running[p.id] = p
	s.progress = time.Now()
	delete(s.idleSince, p.id)
	delete(s.idleRounds, p.id)
	delete(s.reported, p.id)
}

// ended records that p's handler returned. Its resume position is
// forgotten: the next claim works it out again.
func (s *Source) ended(p *Partition) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[p.id] == p {
		delete(s.running, p.id)
	}
	delete(s.resolved, p.id)
	if _, ok := s.claimed[p.id]; ok && s.running[p.id] == nil {
		s.idleSince[p.id] = time.Now()
		delete(s.idleRounds, p.id)
	}
}

// resetStalls starts the stall clocks of the owned partitions again, for a
// new processor: what it does not start within the bound is a new stall.
func (s *Source) resetStalls() {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.idleSince {
		s.idleSince[id] = now
	}
	s.idleRounds = nil
	s.progress = now
	s.reported = nil
}

// healed counts a heal.
func (s *Source) healed(reason string) {
	if s.opts.OnHeal != nil {
		s.opts.OnHeal(reason)
	}
}

// watch checks the owned partitions once per update interval until ctx
// ends. A partition owned with no handler for longer than the ownership
// expiration restarts the processor through restart, the only way to make
// the SDK forget it, once the processor is known not to be still opening
// it: a round of the processor claims, then opens the links of what it
// newly claimed one after the other, and only then starts the next round,
// so a partition idle at two rounds was not handed out by the round in
// between. Opening a claim of many partitions on a slow link can take
// longer than the expiration; restarting then would cancel the handlers
// already running, which replay what they had not checkpointed, and
// start the same slow claim again. A processor that neither claims nor
// hands a partition out for longer than the expiration is stuck (an
// attach that never ends) and is restarted as well. A
// handler silent for longer than the ownership expiration plus the batch
// wait is cancelled. Each stall is logged at ERROR once.
func (s *Source) watch(ctx context.Context, restart context.CancelCauseFunc) {
	unreadAfter := s.opts.LoadBalancing.OwnershipExpiration
	silentAfter := s.opts.LoadBalancing.OwnershipExpiration + s.opts.Batch.MaxWait
	t := time.NewTicker(s.opts.LoadBalancing.UpdateInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		var unread []string
		var silent []*Partition
		s.mu.Lock()
		stalled := now.Sub(s.progress) > unreadAfter
		for id, since := range s.idleSince {
			if now.Sub(since) > unreadAfter && !s.reported[id] && (s.idleRounds[id] >= 2 || stalled) {
				unread = append(unread, id)
			}
		}
		for id, p := range s.running {
			if now.Sub(p.lastBeat()) > silentAfter && !s.reported[id] {
				silent = append(silent, p)
			}
		}
		if s.reported == nil {
			s.reported = map[string]bool{}
		}
		for _, id := range unread {
			s.reported[id] = true
		}
		for _, p := range silent {
			s.reported[p.id] = true
		}
		s.mu.Unlock()
		for _, p := range silent {
			err := fmt.Errorf("event hub %q partition %s: the handler neither received nor reported progress for %s (bound: ownership_expiration %s + max_wait %s)",
				s.hub, p.id, now.Sub(p.lastBeat()).Round(time.Second), s.opts.LoadBalancing.OwnershipExpiration, s.opts.Batch.MaxWait)
			s.log.Error("partition stalled; reopening it", "partition", p.id, "reason", healSilent, "cause", err)
			s.healed(healSilent)
			p.cancel(err)
		}
		if len(unread) > 0 {
			slices.Sort(unread)
			err := fmt.Errorf("%w: event hub %q partitions %v owned by this replica with no reader for more than ownership_expiration %s (a claim the processor registered but never handed out)",
				errHealRestart, s.hub, unread, unreadAfter)
			s.log.Error("partitions owned but not read; restarting the processor", "partitions", unread, "reason", healUnread, "cause", err)
			s.healed(healUnread)
			restart(err)
			return
		}
	}
}
