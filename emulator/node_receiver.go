package emulator

// Behavior: partition receiver links ("hub/ConsumerGroups/cg/Partitions/N").
//
// Attach: the source's apache.org:selector-filter:string expression is the
// start position (absent = latest). com.microsoft:epoch (long) is the
// owner level and com.microsoft:receiver-name names the receiver in
// ownership errors. The hub applies the epoch rules: an equal or higher
// epoch steals (the old link is detached with amqp:link:stolen), a lower
// epoch or a non-epoch receiver next to an epoch one is refused with
// amqp:link:stolen, a sixth non-epoch receiver with
// amqp:resource-limit-exceeded. Unknown hub or consumer group →
// amqp:not-found, unknown partition or bad filter →
// com.microsoft:argument-out-of-range, all as rejected attaches. The
// reply has role sender, initial-delivery-count 0 and snd-settle-mode
// settled.
//
// Delivery: one goroutine per link waits for link credit and session
// window, reads events from the hub (live tailing) and sends them
// pre-settled (the SDK never settles), each as the stored message with
// x-opt-sequence-number (long), x-opt-offset (string), x-opt-enqueued-time
// (timestamp) and, only for keyed events, x-opt-partition-key merged into
// its message annotations. A steal or ForceDetach detaches the link with
// the hub's condition (closed=true). Detach, session end and connection
// loss close the hub receiver and release its ownership.

import (
	"context"
	"errors"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
	"github.com/ehsink/ehsink/emulator/internal/hub"
)

// maxBatch bounds the events one delivery round reads from the hub.
const maxBatch = 512

// deliverer is the delivery state of a partition receiver link, owned by
// its delivery goroutine.
type deliverer struct {
	rcv     *hub.Receiver
	ctx     context.Context
	cancel  context.CancelFunc
	pending []hub.Event
	buf     []byte
	msgs    [][]byte
}

func (s *Server) attachPartitionReceiver(l *link, a *amqp.Attach) *amqp.Error {
	addr := a.Source.Address
	ent, err := parseEntity(addr)
	if err != nil || ent.consumerGroup == "" {
		return &amqp.Error{Condition: amqp.ErrNotFound, Description: "no consumer group partition at '" + addr + "'"}
	}
	h, err := s.ns.Hub(ent.hub)
	if err != nil {
		return toAMQPError(err)
	}
	start := hub.Latest()
	if expr, ok := a.Source.Selector(); ok {
		if start, err = hub.ParseSelector(expr); err != nil {
			return toAMQPError(err)
		}
	}
	opts := hub.ReceiverOptions{ConsumerGroup: ent.consumerGroup, Partition: ent.partition, Name: a.Name, Start: start}
	if v, ok := a.Properties.Get(amqp.Symbol("com.microsoft:receiver-name")); ok {
		if name, ok := v.(string); ok && name != "" {
			opts.Name = name
		}
	}
	if v, ok := a.Properties.Get(amqp.Symbol("com.microsoft:epoch")); ok {
		e, ok := toInt64(v)
		if !ok {
			return &amqp.Error{Condition: amqp.ErrInvalidField, Description: "com.microsoft:epoch must be a long"}
		}
		opts.Epoch = &e
	}
	rcv, err := h.OpenReceiver(opts)
	if err != nil {
		return toAMQPError(err)
	}
	c := l.s.c
	d := &deliverer{rcv: rcv}
	d.ctx, d.cancel = context.WithCancel(c.ctx)
	l.deliverer = d
	l.cleanup = func() { d.cancel(); rcv.Close() }
	l.start = func() {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			l.deliverLoop(d)
		}()
	}
	return nil
}

func toInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int32:
		return int64(v), true
	case int16:
		return int64(v), true
	case int8:
		return int64(v), true
	}
	return 0, false
}

// deliverLoop runs on the link's delivery goroutine until the link is
// detached, the receiver is detached by the hub, or the connection ends.
func (l *link) deliverLoop(d *deliverer) {
	c := l.s.c
	for {
		c.mu.Lock()
		if l.detached || c.closing {
			c.mu.Unlock()
			return
		}
		room := min(l.credit, l.s.remoteIncomingWindow, maxBatch)
		c.mu.Unlock()
		if room == 0 {
			select {
			case <-l.wakeCh:
			case <-d.ctx.Done():
				return
			case <-d.rcv.Done():
				l.hubDetached(d, d.rcv.Err())
				return
			}
			continue
		}
		if len(d.pending) == 0 {
			evs, err := d.rcv.Next(d.ctx, int(room))
			if err != nil {
				if d.ctx.Err() == nil {
					l.hubDetached(d, err)
				}
				return
			}
			d.pending = evs
		}
		if !l.sendPending(d) {
			return
		}
	}
}

// hubDetached detaches the link after Next failed: the hub detached its
// receiver (steal or ForceDetach), or the partition could not be read. A
// read failure is said, to the log and to the client as an internal error,
// rather than left as a link that delivers nothing. ErrClosed means the
// link is going away anyway.
func (l *link) hubDetached(d *deliverer, err error) {
	var he *hub.Error
	if errors.As(err, &he) {
		l.detachWithError(toAMQPError(err))
		return
	}
	if errors.Is(err, hub.ErrClosed) {
		return
	}
	l.s.c.log.Error("partition receiver cannot read its partition; detaching the link", "receiver", d.rcv.String(), "err", err)
	l.detachWithError(toAMQPError(err))
}

// sendPending encodes pending events and sends as many as credit and
// window allow. It returns false when the link is gone.
func (l *link) sendPending(d *deliverer) bool {
	c := l.s.c
	d.buf, d.msgs = d.buf[:0], d.msgs[:0]
	for _, ev := range d.pending {
		start := len(d.buf)
		var err error
		d.buf, err = amqp.AppendWithAnnotations(d.buf, ev.Message, eventAnnotations(ev))
		if err != nil {
			// A stored message we cannot parse: send it as is rather than
			// stall the partition.
			c.log.Warn("stored event is not a valid AMQP message", "seq", ev.SequenceNumber, "err", err)
			d.buf = append(d.buf[:start], ev.Message...)
		}
		d.msgs = append(d.msgs, d.buf[start:len(d.buf):len(d.buf)])
	}
	c.waitSpace()
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.detached || c.closing {
		return false
	}
	sent := 0
	for i, msg := range d.msgs {
		if l.credit == 0 || l.s.remoteIncomingWindow < c.framesFor(len(msg)) {
			break
		}
		l.sendMessageLocked(msg, uint64(d.pending[i].SequenceNumber))
		sent++
	}
	d.pending = d.pending[sent:]
	if len(d.pending) == 0 {
		d.pending = nil
	}
	return true
}

// eventAnnotations are the service annotations merged into each event.
func eventAnnotations(ev hub.Event) amqp.Map {
	m := amqp.Map{
		{Key: amqp.Symbol("x-opt-sequence-number"), Value: ev.SequenceNumber},
		{Key: amqp.Symbol("x-opt-offset"), Value: ev.Offset},
		{Key: amqp.Symbol("x-opt-enqueued-time"), Value: ev.EnqueuedTime},
	}
	if ev.PartitionKey != nil {
		m = append(m, amqp.KeyValue{Key: amqp.Symbol("x-opt-partition-key"), Value: *ev.PartitionKey})
	}
	return m
}
