package source

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/sinks"
)

// Partition is one partition this replica owns, handed to the handler of
// [Source.Run]. It is meant for the one goroutine running that handler; its
// methods must not be called after the handler returned.
type Partition struct {
	s    *Source
	id   string
	pc   *azeventhubs.ProcessorPartitionClient
	recv receiver // pc, or a reader connection's client (connections.go)
	// closeReader closes recv when it is not pc; the handler's goroutine
	// calls it once, before pc is closed
	closeReader func()
	// attaching is set while a reader's link has delivered nothing yet
	// (connections.go); only Receive's goroutine uses it
	attaching bool
	// received is the sequence number of the last event received, when
	// one was (seen); only Receive's goroutine uses them
	received int64
	seen     bool
	lost     atomic.Bool
	beat     atomic.Int64 // unix nanoseconds of the last Receive or Heartbeat
	cancel   context.CancelCauseFunc
	stored   int64 // StoredCheckpoint's answer
	known    bool
	// lastRead is closed when the properties read at the claim
	// (Source.readLast) has answered or given up; the first Receive waits
	// for it, then sets it to nil (only Receive's goroutine uses it)
	lastRead <-chan struct{}
}

func (s *Source) newPartition(ctx context.Context, pc *azeventhubs.ProcessorPartitionClient, cancel context.CancelCauseFunc) *Partition {
	p := &Partition{s: s, id: pc.PartitionID(), pc: pc, cancel: cancel}
	s.mu.Lock()
	p.stored, p.known = s.stored[p.id]
	s.mu.Unlock()
	p.lastRead = s.readLast(ctx, p.id)
	p.recv, p.closeReader = s.reader(pc)
	p.attaching = p.recv != receiver(pc)
	p.Heartbeat()
	return p
}

// StoredCheckpoint returns the sequence number of the checkpoint that was
// stored for the partition when this replica claimed it (-1: none), and
// false when the store could not be read then. A handler that finds its
// sink's watermark past it checkpoints the watermark, so that a partition
// receiving nothing more does not keep a checkpoint behind its sink.
func (p *Partition) StoredCheckpoint() (seq int64, ok bool) { return p.stored, p.known }

// Heartbeat tells the source's watchdog that the handler is alive although
// it does not call Receive: it is retrying a sink, or holding back while a
// circuit breaker is open. A handler that neither receives nor heartbeats
// for longer than the ownership expiration plus the batch wait is
// cancelled (it drains, and the partition is reopened). Safe for
// concurrent use.
func (p *Partition) Heartbeat() { p.beat.Store(time.Now().UnixNano()) }

func (p *Partition) lastBeat() time.Time { return time.Unix(0, p.beat.Load()) }

// LeaseExpiry returns when the partition's ownership lease runs out unless
// it is renewed again: the ownership expiration after the last successful
// renewal was sent (a lower bound on the store's own clock). A handler
// stops committing before then when the store cannot be reached to renew
// it: after that instant another replica may own the partition. ok is
// false when no renewal was recorded. Safe for concurrent use.
func (p *Partition) LeaseExpiry() (at time.Time, ok bool) {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	sent, ok := p.s.renewed[p.id]
	return sent.Add(p.s.opts.LoadBalancing.OwnershipExpiration), ok
}

// heldAfterReceived returns how many events the partition held after the
// last one received, by its last properties read (Source.heldAfter): 0
// when not known.
func (p *Partition) heldAfterReceived() int64 {
	if !p.seen {
		return 0
	}
	return p.s.heldAfter(p.id, p.received)
}

// beatWhile heartbeats until the returned function is called.
func (p *Partition) beatWhile() (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(p.s.opts.LoadBalancing.OwnershipExpiration / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				p.Heartbeat()
			}
		}
	}()
	return func() { close(done) }
}

// Seek moves the partition's reading to just after pos, keeping the
// lease: the next Receive returns the events that follow pos. A handler
// calls it when its sink refused a batch because another writer committed
// the partition past where this claim began reading: the previous owner,
// finishing a commit it began before the claim took the partition. Reading
// on after that commit is what a new claim would do, without waiting a
// load-balancing round (up to an update interval) in between. It must not
// be called while Receive runs.
func (p *Partition) Seek(pos sinks.Position) error {
	if p.lost.Load() {
		return p.lostErr(nil)
	}
	start := azeventhubs.StartPosition{SequenceNumber: &pos.SequenceNumber}
	if pos.Offset != "" {
		start = azeventhubs.StartPosition{Offset: &pos.Offset}
	}
	r, closeIt, err := p.s.openReader(p.id, start)
	if err != nil {
		return fmt.Errorf("event hub %q partition %s: seek after %s: %w", p.s.hub, p.id, pos, err)
	}
	p.closeReader()
	p.recv, p.closeReader = r, closeIt
	// the new link attaches at its first receive (connections.go)
	p.attaching = true
	p.received, p.seen = pos.SequenceNumber, true
	p.Heartbeat()
	return nil
}

// ID returns the partition ID.
func (p *Partition) ID() string { return p.id }

// Receive returns the next events of the partition in sequence-number order:
// as soon as Batch.MinEvents (1 by default) are there, with what else is
// immediately there, up to MaxEvents; else what arrived within MaxWait
// after the call began (an empty batch is not an error). Once another
// owner took the partition it returns an error matching ErrOwnershipLost;
// events of the interrupted call are dropped (the new owner reads them).
// ctx bounds the call.
//
// The SDK's ReceiveEvents returns at its count or at its deadline, so a
// single call asking for a full batch holds live traffic for MaxWait. A
// receive is therefore two calls: one for MinEvents, bounded by MaxWait,
// then one for the rest of a batch, bounded by a linger of a few
// milliseconds (or MinWait): at its deadline the SDK returns what came
// and everything its prefetch holds (go-amqp's Receiver.Receive hands a
// prefetched message over before it looks at the context). On a backlog
// (known from the partition's properties) the second call waits for the
// events the partition holds, up to a full batch.
func (p *Partition) Receive(ctx context.Context) ([]sinks.Event, error) {
	if p.lost.Load() {
		return nil, p.lostErr(nil)
	}
	p.Heartbeat()
	defer p.Heartbeat()
	if p.lastRead != nil {
		select {
		case <-p.lastRead:
		case <-ctx.Done():
		}
		p.lastRead = nil
	}
	b := p.s.opts.Batch
	wait, count := b.MaxWait, min(b.MinEvents, b.MaxEvents)
	switch held := p.heldAfterReceived(); {
	case p.attaching:
		wait, count = max(wait, readerAttachWait), 1
		defer p.beatWhile()()
	case held > 0 && held < int64(count):
		// Waiting for MinEvents where the partition holds less (the end
		// of a backlog) would commit its last events MaxWait late. What
		// came after the properties were read comes with the next call.
		count = int(held)
	}
	deadline := time.Now().Add(wait)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	got, err := p.recv.ReceiveEvents(wctx, count, nil)
	if err == nil {
		p.attaching = false
	}
	if err != nil {
		switch {
		case p.attaching && ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
			// the attach did not finish in time (connections.go); the
			// next call tries again
			p.s.log.Debug("partition reader not attached yet", "partition", p.id, "err", err)
			return nil, nil
		case isOwnershipLost(err):
			p.markLost(ctx, err)
			return nil, p.lostErr(err)
		case ctx.Err() != nil:
			return nil, fmt.Errorf("partition %s: receive: %w", p.id, ctx.Err())
		case wctx.Err() != nil:
			// MaxWait passed without events. The call may end with
			// another error than the context's: a connection dialed
			// again that the deadline cut short reports a net timeout.
			p.s.log.Debug("partition receive: max_wait passed", "partition", p.id, "err", err)
			return nil, nil
		case isUnauthorized(err) || isNotFound(err):
			return nil, fmt.Errorf("event hub %q partition %s: receive: %w", p.s.hub, p.id, err)
		}
		return nil, fmt.Errorf("event hub %q partition %s: %w: %w", p.s.hub, p.id, errReceiveFailed, err)
	}
	if len(got) == count && count < b.MaxEvents {
		held := p.s.heldAfter(p.id, got[len(got)-1].SequenceNumber)
		more, err := p.gather(ctx, deadline, b.MaxEvents-count, held)
		if err != nil {
			return nil, err
		}
		got = append(got, more...)
	}
	return p.events(got), nil
}

// handOverLinger is how long Receive waits for more events once it holds
// MinEvents: the events of one send arrive as one transfer frame each,
// decoded one after another, and the first wakes the receive before the
// others are queued. A few milliseconds take them all, and are a small
// part of what a commit costs (tens of milliseconds).
const handOverLinger = 3 * time.Millisecond

// gather returns up to n more events: those that are there within the
// linger (or Batch.MinWait), no later than deadline. When the partition
// is known to hold more (held, after the events in hand, by its last
// properties read: a backlog), it asks for them and waits for them up to
// deadline: they exist and are on their way, and a backlog's batches then
// stay full when the prefetch holds less than a batch (a sink as fast as
// the source). Its errors are ErrOwnershipLost (the batch is then
// dropped, as for an interrupted receive); any other failure ends the
// gathering quietly, and the next Receive meets it.
func (p *Partition) gather(ctx context.Context, deadline time.Time, n int, held int64) ([]*azeventhubs.ReceivedEventData, error) {
	end := time.Now().Add(max(handOverLinger, p.s.opts.Batch.MinWait))
	if held > 0 {
		n, end = int(min(int64(n), held)), deadline
	}
	if deadline.Before(end) {
		end = deadline
	}
	lctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	more, err := p.recv.ReceiveEvents(lctx, n, nil)
	switch {
	case err == nil:
		return more, nil
	case isOwnershipLost(err):
		p.markLost(ctx, err)
		return nil, p.lostErr(err)
	case lctx.Err() == nil:
		p.s.log.Debug("partition receive: gathering a batch", "partition", p.id, "err", err)
	}
	return nil, nil
}

// events converts what the SDK received, and records the last sequence
// number.
func (p *Partition) events(got []*azeventhubs.ReceivedEventData) []sinks.Event {
	if len(got) > 0 {
		p.received, p.seen = got[len(got)-1].SequenceNumber, true
	}
	events := make([]sinks.Event, len(got))
	for i, e := range got {
		events[i] = sinks.Event{
			Partition:      p.id,
			SequenceNumber: e.SequenceNumber,
			Offset:         e.Offset,
			PartitionKey:   e.PartitionKey,
			ContentType:    e.ContentType,
			Properties:     e.Properties,
			Body:           e.Body,
		}
		if e.EnqueuedTime != nil {
			events[i].EnqueuedTime = e.EnqueuedTime.UTC()
		}
	}
	return events
}

// Checkpoint records pos, the last event the sink committed, in the
// checkpoint store. It first checks the partition's lease: when this
// replica's last claim round did not keep the partition, or the lease now
// names another live owner, it writes nothing and returns an error
// matching ErrOwnershipLost, so a replica that lost a partition never
// moves the new owner's checkpoint. The lease is read on its own where the
// store can: a read, where listing the consumer group's leases is billed
// as a write and doubled what a partition cost. ctx bounds the call.
func (p *Partition) Checkpoint(ctx context.Context, pos sinks.Position) error {
	if p.lost.Load() {
		return p.lostErr(nil)
	}
	s := p.s
	owner, ok := s.ownerSeen(p.id)
	if ok {
		var err error
		if owner, ok, err = s.leaseHeld(ctx, p.id); err != nil {
			return fmt.Errorf("event hub %q partition %s: checkpoint: reading ownership: %w", s.hub, p.id, err)
		}
	}
	if !ok {
		p.lost.Store(true)
		s.log.Warn("partition lost", "partition", p.id, "new_owner", owner, "at", "checkpoint")
		return p.lostErr(nil)
	}
	seq := pos.SequenceNumber
	cp := azeventhubs.Checkpoint{
		FullyQualifiedNamespace: s.ns,
		EventHubName:            s.hub,
		ConsumerGroup:           s.opts.ConsumerGroup,
		PartitionID:             p.id,
		SequenceNumber:          &seq,
	}
	if pos.Offset != "" {
		off := pos.Offset
		cp.Offset = &off
	}
	if err := s.opts.Store.SetCheckpoint(ctx, cp, nil); err != nil {
		return fmt.Errorf("event hub %q partition %s: checkpoint seq %d: %w", s.hub, p.id, seq, err)
	}
	return nil
}

// leaseHeld reads partition id's lease from the store and reports whether
// no other replica holds it (owner names the one that does).
func (s *Source) leaseHeld(ctx context.Context, id string) (owner string, ok bool, err error) {
	heldByOther := func(o azeventhubs.Ownership) bool {
		return o.OwnerID != s.owner && o.OwnerID != "" && time.Since(o.LastModifiedTime) < s.opts.LoadBalancing.OwnershipExpiration
	}
	o, found, supported, err := readLease(ctx, s.opts.Store, s.ns, s.hub, s.opts.ConsumerGroup, id)
	if supported {
		if err != nil || !found || !heldByOther(o) {
			return s.owner, true, err
		}
		return o.OwnerID, false, nil
	}
	owners, err := s.opts.Store.ListOwnership(ctx, s.ns, s.hub, s.opts.ConsumerGroup, nil)
	if err != nil {
		return "", false, err
	}
	for _, o := range owners {
		if o.PartitionID == id && heldByOther(o) {
			return o.OwnerID, false, nil
		}
	}
	return s.owner, true, nil
}

// leaseReader is a store that reads one partition's lease on its own:
// every store of package checkpoint and its wrappers are.
type leaseReader interface {
	Lease(ctx context.Context, ns, hub, group, partition string) (o azeventhubs.Ownership, found bool, err error)
}

// readLease reads one lease through store; supported is false when store
// cannot (a wrapper over a store that cannot answers errors.ErrUnsupported).
func readLease(ctx context.Context, store azeventhubs.CheckpointStore, ns, hub, group, id string) (o azeventhubs.Ownership, found, supported bool, err error) {
	lr, ok := store.(leaseReader)
	if !ok {
		return o, false, false, nil
	}
	o, found, err = lr.Lease(ctx, ns, hub, group, id)
	if errors.Is(err, errors.ErrUnsupported) {
		return azeventhubs.Ownership{}, false, false, nil
	}
	return o, found, true, err
}

// takenOver reports whether the partition is lost: Receive or Checkpoint
// saw it, or the store now names another live owner.
func (p *Partition) takenOver(ctx context.Context) bool {
	if p.lost.Load() {
		return true
	}
	s := p.s
	ctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	owners, err := s.opts.Store.ListOwnership(ctx, s.ns, s.hub, s.opts.ConsumerGroup, nil)
	if err != nil {
		return false
	}
	for _, o := range owners {
		if o.PartitionID == p.id && o.OwnerID != s.owner && o.OwnerID != "" &&
			time.Since(o.LastModifiedTime) < s.opts.LoadBalancing.OwnershipExpiration {
			return true
		}
	}
	return false
}

// markLost records and logs the loss, naming the new owner when the store
// already knows it.
func (p *Partition) markLost(ctx context.Context, cause error) {
	if !p.lost.CompareAndSwap(false, true) {
		return
	}
	s := p.s
	newOwner := "unknown"
	if owners, err := s.opts.Store.ListOwnership(ctx, s.ns, s.hub, s.opts.ConsumerGroup, nil); err == nil {
		for _, o := range owners {
			if o.PartitionID == p.id {
				newOwner = o.OwnerID
			}
		}
	}
	s.log.Warn("partition lost", "partition", p.id, "new_owner", newOwner, "at", "receive", "reason", cause)
}

func (p *Partition) lostErr(cause error) error {
	if cause == nil {
		return fmt.Errorf("event hub %q partition %s: %w", p.s.hub, p.id, ErrOwnershipLost)
	}
	return fmt.Errorf("event hub %q partition %s: %w: %w", p.s.hub, p.id, ErrOwnershipLost, cause)
}
