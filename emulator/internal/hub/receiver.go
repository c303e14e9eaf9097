package hub

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Event is one event as a receiver delivers it.
type Event struct {
	// SequenceNumber is the event's sequence number in its partition, from 0.
	SequenceNumber int64
	// Offset is the event's offset: an opaque, unique, increasing decimal string.
	Offset string
	// EnqueuedTime is when the event was appended (UTC, truncated to ms).
	EnqueuedTime time.Time
	// PartitionKey is the key the event was sent with, nil if none.
	PartitionKey *string
	// Message is the encoded inner AMQP message exactly as appended. It may
	// share memory with the hub's storage and with other events: never modify it.
	Message []byte
}

// ReceiverOptions configures OpenReceiver.
type ReceiverOptions struct {
	// ConsumerGroup is the consumer group; it must be declared or "$Default".
	// If empty, "$Default".
	ConsumerGroup string
	// Partition is the partition ID.
	Partition string
	// Name identifies the receiver in ownership errors (the link's
	// com.microsoft:receiver-name property).
	Name string
	// Epoch is the owner level (com.microsoft:epoch); nil for a receiver
	// without epoch. See OpenReceiver for the rules.
	Epoch *int64
	// Start is where delivery starts; the zero value is Latest.
	Start StartPosition
	// OnDetach, if not nil, is called once when the hub detaches the
	// receiver: ownership lost to another receiver (CondStolen) or
	// ForceDetach (CondDetachForced). It is not called for Close, nor by
	// Namespace.Close. It runs on the goroutine that caused the detach (an
	// OpenReceiver or ForceDetach caller) with no hub lock held: it may call
	// any hub method but should return quickly.
	OnDetach func(err *Error)
}

// Receiver reads one partition for one consumer group. Close, and the
// detaching by the hub, are safe at any time from any goroutine; Next is
// meant for one goroutine (concurrent calls are serialized).
type Receiver struct {
	p        *partition
	cg       string
	name     string
	epoch    *int64
	onDetach func(*Error)

	readMu  sync.Mutex // held by Next; guards the fields below it
	next    int64      // sequence number of the next event to deliver
	cur     cursor
	bounds  []eventBounds // per event of the current batch: where its offset and key are in scratch
	scratch []byte        // offsets and keys of the current batch
	nkeys   int           // events with a key in the current batch

	// guarded by p.mu
	closed bool
	err    error         // what Next returns once closed: *Error or ErrClosed
	done   chan struct{} // closed when the receiver is closed or detached
}

// cursor remembers where the last Next stopped: the record at pos of seg has
// sequence number seq.
type cursor struct {
	seg *segment
	pos int64
	seq int64
}

type eventBounds struct {
	off, key, end int32 // in scratch: offset digits [off:key), key bytes [key:end)
	hasKey        bool
}

// group is the ownership state of one (partition, consumer group): either
// one epoch receiver or up to MaxNonEpochReceivers without epoch.
type group struct {
	owner *Receiver   // the epoch receiver, or nil
	plain []*Receiver // receivers without epoch
}

func (g *group) all() []*Receiver {
	out := make([]*Receiver, 0, len(g.plain)+1)
	if g.owner != nil {
		out = append(out, g.owner)
	}
	return append(out, g.plain...)
}

// OpenReceiver opens a receiver on a partition and resolves its start
// position. Ownership is scoped to (hub, consumer group, partition):
//
//   - epoch e, holder with epoch e0 <= e: the holder is detached with
//     CondStolen ("New receiver ... with higher epoch ...") and the new
//     receiver is accepted; equal epochs steal, the last one wins.
//   - epoch e, holder with epoch e0 > e: refused with CondStolen
//     ("Receiver ... with a higher epoch ... already exists ...").
//   - epoch e, receivers without epoch present: all of them are detached
//     with CondStolen and the new one is accepted.
//   - no epoch, an epoch holder present: refused with CondStolen
//     ("At least one receiver for the endpoint is created with epoch ...").
//   - no epoch, MaxNonEpochReceivers already present: refused with
//     CondResourceLimitExceeded.
//
// An undeclared consumer group is an *Error with CondNotFound, an unknown
// partition one with CondArgumentOutOfRange. OnDetach of detached holders
// runs before OpenReceiver returns.
func (h *Hub) OpenReceiver(opts ReceiverOptions) (*Receiver, error) {
	cg := opts.ConsumerGroup
	if cg == "" {
		cg = DefaultConsumerGroup
	}
	if !h.cgs[cg] {
		return nil, errConsumerGroupNotFound(h.name, cg)
	}
	p, err := h.partition(opts.Partition)
	if err != nil {
		return nil, err
	}
	r := &Receiver{p: p, cg: cg, name: opts.Name, onDetach: opts.OnDetach, done: make(chan struct{})}
	if opts.Epoch != nil {
		e := *opts.Epoch
		r.epoch = &e
	}

	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	start, err := p.resolveLocked(opts.Start)
	if err != nil {
		p.mu.Unlock()
		return nil, err
	}
	r.next = start
	g := p.groups[cg]
	if g == nil {
		g = &group{}
		p.groups[cg] = g
	}
	var stolen []*Receiver
	var stolenErrs []*Error
	switch {
	case r.epoch != nil && g.owner != nil:
		old := g.owner
		if *r.epoch < *old.epoch {
			p.mu.Unlock()
			return nil, errLowerEpoch(old.name, *old.epoch, r.name, *r.epoch)
		}
		e := errStolenByEpoch(r.name, *r.epoch, old.name, old.epoch)
		old.detachLocked(e)
		stolen, stolenErrs = append(stolen, old), append(stolenErrs, e)
		g.owner = r
	case r.epoch != nil:
		for _, old := range g.all() {
			e := errStolenByEpoch(r.name, *r.epoch, old.name, nil)
			old.detachLocked(e)
			stolen, stolenErrs = append(stolen, old), append(stolenErrs, e)
		}
		g.owner = r
	case g.owner != nil:
		p.mu.Unlock()
		return nil, errNonEpochRefused(*g.owner.epoch)
	case len(g.plain) >= MaxNonEpochReceivers:
		names := make([]string, len(g.plain))
		for i, o := range g.plain {
			names[i] = nameOrNil(o.name)
		}
		p.mu.Unlock()
		return nil, errTooManyReceivers(names)
	default:
		g.plain = append(g.plain, r)
	}
	p.mu.Unlock()
	for i, old := range stolen {
		old.notifyDetach(stolenErrs[i])
	}
	return r, nil
}

// detachLocked closes r and removes it from its group; call with p.mu held.
// The caller calls notifyDetach after releasing the lock.
func (r *Receiver) detachLocked(err error) {
	if r.closed {
		return
	}
	r.closed = true
	r.err = err
	close(r.done)
	g := r.p.groups[r.cg]
	if g == nil {
		return
	}
	if g.owner == r {
		g.owner = nil
	}
	for i, o := range g.plain {
		if o == r {
			g.plain = append(g.plain[:i:i], g.plain[i+1:]...)
			break
		}
	}
}

func (r *Receiver) notifyDetach(e *Error) {
	if r.onDetach != nil {
		r.onDetach(e)
	}
}

// Name returns the receiver's name.
func (r *Receiver) Name() string { return r.name }

// Partition returns the receiver's partition ID.
func (r *Receiver) Partition() string { return r.p.id }

// ConsumerGroup returns the receiver's consumer group.
func (r *Receiver) ConsumerGroup() string { return r.cg }

// Epoch returns the receiver's epoch, or nil when it has none.
func (r *Receiver) Epoch() *int64 {
	if r.epoch == nil {
		return nil
	}
	e := *r.epoch
	return &e
}

// Done returns a channel that is closed when the receiver is closed or detached.
func (r *Receiver) Done() <-chan struct{} { return r.done }

// Err returns nil while the receiver is open, then what Next returns: the
// *Error it was detached with, or ErrClosed.
func (r *Receiver) Err() error {
	r.p.mu.Lock()
	defer r.p.mu.Unlock()
	return r.err
}

// Close closes the receiver and releases its ownership. A blocked Next
// returns ErrClosed. It is idempotent and does not call OnDetach.
func (r *Receiver) Close() {
	r.p.mu.Lock()
	r.detachLocked(ErrClosed)
	r.p.mu.Unlock()
}

// Next returns the next events, at least one and at most max (max < 1 means
// 1), in sequence-number order. It blocks until an event is available, ctx
// is done (ctx.Err()), or the receiver is closed (ErrClosed) or detached
// (the *Error of the detach). Events appended while Next waits are returned
// as soon as their Append returns. A receiver behind the first retained
// event continues at the first retained event.
//
// The returned events do not change afterwards and may be kept; their
// Message bytes must not be modified.
func (r *Receiver) Next(ctx context.Context, max int) ([]Event, error) {
	if max < 1 {
		max = 1
	}
	r.readMu.Lock()
	defer r.readMu.Unlock()
	r.bounds = r.bounds[:0]
	r.scratch = r.scratch[:0]
	r.nkeys = 0
	var evs []Event
	p := r.p
	for {
		p.mu.Lock()
		if r.closed && len(evs) == 0 {
			err := r.err
			p.mu.Unlock()
			return nil, err
		}
		if r.next < p.beginSeq {
			r.next = p.beginSeq
		}
		if !r.closed && r.next < p.nextSeq && len(evs) < max {
			if evs == nil {
				evs = make([]Event, 0, min(int64(max), p.nextSeq-r.next))
			}
			snap := r.snapshotLocked()
			p.mu.Unlock()
			var err error
			evs, err = r.read(snap, max, evs)
			snap.seg.release()
			if err != nil {
				return nil, err
			}
			continue // the batch may continue in the next segment
		}
		if len(evs) > 0 {
			p.mu.Unlock()
			return r.finish(evs), nil
		}
		if p.notify == nil {
			p.notify = make(chan struct{})
		}
		wake := p.notify
		p.mu.Unlock()
		select {
		case <-wake:
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// snapshot is a stable view of the records a Next call reads.
type snapshot struct {
	seg  *segment
	data []byte // memory mode: the segment's records
	pos  int64  // where to start decoding
	seq  int64  // sequence number of the record at pos
	end  int64  // record bytes available in seg
	left int64  // records available from seq on
}

// snapshotLocked picks the segment and position holding r.next; call with
// p.mu held and r.next in [beginSeq, nextSeq). It pins a disk segment.
func (r *Receiver) snapshotLocked() snapshot {
	p := r.p
	c := r.cur
	valid := c.seg != nil && !c.seg.retired.Load() && c.seq <= r.next
	if valid && c.seq == c.seg.end() {
		// The cursor is at the end of its segment: continue in the next one.
		i := segmentIndex(p.segs, c.seq)
		valid = false
		if i < len(p.segs) && p.segs[i].baseSeq == c.seq {
			c = cursor{seg: p.segs[i], pos: 0, seq: c.seq}
			valid = true
		}
	}
	if valid && r.next >= c.seg.end() {
		valid = false
	}
	if !valid {
		s := p.segs[segmentIndex(p.segs, r.next)]
		pos, seq := s.seek(r.next)
		c = cursor{seg: s, pos: pos, seq: seq}
	}
	c.seg.acquire()
	return snapshot{seg: c.seg, data: c.seg.data, pos: c.pos, seq: c.seq, end: c.seg.size, left: c.seg.end() - c.seq}
}

// segmentIndex returns the index of the first segment ending after seq.
func segmentIndex(segs []*segment, seq int64) int {
	lo, hi := 0, len(segs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if segs[m].end() > seq {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// read appends to evs the events from r.next on that snap holds, until evs
// has max events, without holding any lock, and advances r.next and r.cur.
// Offsets and keys go to r.scratch; finish turns them into strings.
func (r *Receiver) read(snap snapshot, max int, evs []Event) ([]Event, error) {
	s := snap.seg
	skip := r.next - snap.seq
	want := min(int64(max-len(evs)), snap.left-skip)
	end := snap.end
	if s.f != nil {
		// Read about what is needed: the records to skip and want more, at
		// the segment's average record size.
		avg := snap.end / max64(snap.seq-s.baseSeq+snap.left, 1)
		n := (skip+want+1)*avg + 4096
		end = min(snap.pos+min(max64(n, 64<<10), 8<<20), snap.end)
	}
	b, err := s.read(snap.data, snap.pos, end)
	if err != nil {
		return evs, r.p.errorf("%w", err)
	}
	pos, seq := snap.pos, snap.seq
	verify := s.f != nil
	for got := int64(0); got < want; {
		rec, n, err := parseRecord(b, r.p.tab, verify)
		if err != nil {
			if errors.Is(err, errIncomplete) && s.f != nil && pos < snap.end {
				if got > 0 {
					break // the read ended inside a record: it is read again from the cursor
				}
				// Nothing decoded yet: read on from pos, at least the whole
				// next record (every record before snap.end is complete).
				need := max64(int64(n), 64<<10)
				if b, err = s.read(nil, pos, min(pos+need, snap.end)); err != nil {
					return evs, r.p.errorf("%w", err)
				}
				continue
			}
			return evs, r.p.errorf("read at offset %d (sequence number %d): %w", s.baseOffset+pos, seq, err)
		}
		if rec.seq != seq {
			return evs, r.p.errorf("read at offset %d: sequence number %d, want %d: %w", s.baseOffset+pos, rec.seq, seq, errCorrupt)
		}
		if seq >= r.next {
			eb := eventBounds{off: int32(len(r.scratch))}
			r.scratch = strconv.AppendInt(r.scratch, s.baseOffset+pos, 10)
			eb.key = int32(len(r.scratch))
			if rec.hasKey {
				eb.hasKey = true
				r.nkeys++
				r.scratch = append(r.scratch, rec.key...)
			}
			eb.end = int32(len(r.scratch))
			r.bounds = append(r.bounds, eb)
			evs = append(evs, Event{
				SequenceNumber: seq,
				EnqueuedTime:   time.UnixMilli(rec.ms).UTC(),
				Message:        rec.msg,
			})
			got++
		}
		b = b[n:]
		pos += int64(n)
		seq++
	}
	r.cur = cursor{seg: s, pos: pos, seq: seq}
	if seq > r.next {
		r.next = seq
	}
	return evs, nil
}

// finish sets the offsets and partition keys of evs from r.scratch: one
// string holds every offset and key of the batch.
func (r *Receiver) finish(evs []Event) []Event {
	all := string(r.scratch)
	var keys []string
	if r.nkeys > 0 {
		keys = make([]string, 0, r.nkeys)
	}
	for i := range evs {
		eb := r.bounds[i]
		evs[i].Offset = all[eb.off:eb.key]
		if eb.hasKey {
			keys = append(keys, all[eb.key:eb.end])
			evs[i].PartitionKey = &keys[len(keys)-1]
		}
	}
	if cap(r.scratch) > 1<<20 {
		r.scratch, r.bounds = nil, nil
	}
	return evs
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// String describes the receiver for logs.
func (r *Receiver) String() string {
	ep := "none"
	if r.epoch != nil {
		ep = strconv.FormatInt(*r.epoch, 10)
	}
	return fmt.Sprintf("receiver %q (hub %q, consumer group %q, partition %s, epoch %s)", r.name, r.p.hub.name, r.cg, r.p.id, ep)
}
