package emulator

import (
	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

// sessionWindow is the incoming window the server grants each session, in
// transfer frames. It is topped up when half is used.
const sessionWindow = 5000

// session is one AMQP session. All fields are guarded by conn.mu. The
// server uses the client's channel number and the client's link handles
// for its own side, which keeps lookups to one map each.
type session struct {
	c       *conn
	channel uint16

	// Client → server transfers.
	nextIncomingID uint32
	incomingWindow uint32 // frames the client may still send before our next flow

	// Server → client transfers.
	nextOutgoingID       uint32
	remoteIncomingWindow uint32 // frames we may still send
	nextDeliveryID       uint32

	links map[uint32]*link // by handle

	// gone holds handles the client detached and has not attached again.
	// Frames for them that were in flight when the detach was sent (a late
	// flow from go-amqp's receiver, a transfer, a second detach) are
	// ignored: an unknown handle would otherwise be a protocol error, and
	// closing the connection for it takes down every other link.
	gone map[uint32]struct{}
}

// maxGoneHandles bounds session.gone. Clients reuse handles, so the set
// stays tiny in practice; a client that never does cannot grow it
// without bound.
const maxGoneHandles = 1024

func newSession(c *conn, ch uint16, b *amqp.Begin) *session {
	return &session{
		c:                    c,
		channel:              ch,
		nextIncomingID:       b.NextOutgoingID,
		incomingWindow:       sessionWindow,
		remoteIncomingWindow: b.IncomingWindow,
		links:                map[uint32]*link{},
		gone:                 map[uint32]struct{}{},
	}
}

// forgetLocked removes a detached link's handle and remembers it as gone.
func (s *session) forgetLocked(h uint32) {
	delete(s.links, h)
	if len(s.gone) >= maxGoneHandles {
		for old := range s.gone {
			delete(s.gone, old)
			break
		}
	}
	s.gone[h] = struct{}{}
}

// isGoneLocked reports whether h was detached by the client, so a frame
// for it is late rather than illegal.
func (s *session) isGoneLocked(h uint32) bool {
	_, ok := s.gone[h]
	return ok
}

// flowLocked builds a flow with the session fields; l adds link fields.
// next-incoming-id is always set: the Event Hubs client ends the session
// when it is missing.
func (s *session) flowLocked(l *link) *amqp.Flow {
	next := s.nextIncomingID
	f := &amqp.Flow{
		NextIncomingID: &next,
		IncomingWindow: s.incomingWindow,
		NextOutgoingID: s.nextOutgoingID,
		OutgoingWindow: sessionWindow,
	}
	if l != nil {
		h, dc, credit := l.handle, l.deliveryCount, l.credit
		f.Handle, f.DeliveryCount, f.LinkCredit = &h, &dc, &credit
	}
	return f
}

func (s *session) onFlow(f *amqp.Flow) error {
	c := s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	next := uint32(0)
	if f.NextIncomingID != nil {
		next = *f.NextIncomingID
	}
	s.remoteIncomingWindow = next + f.IncomingWindow - s.nextOutgoingID
	if f.Handle == nil {
		if f.Echo {
			c.writeFrameLocked(s.channel, s.flowLocked(nil))
		}
		s.notifyAllLocked()
		return nil
	}
	l := s.links[*f.Handle]
	if l == nil {
		if s.isGoneLocked(*f.Handle) {
			return nil
		}
		return errProto(amqp.ErrUnattachedHandle, "flow for unknown handle %d", *f.Handle)
	}
	if l.detached {
		return nil
	}
	if l.serverSends() && f.LinkCredit != nil {
		dc := uint32(0)
		if f.DeliveryCount != nil {
			dc = *f.DeliveryCount
		}
		l.credit = dc + *f.LinkCredit - l.deliveryCount
		if f.Drain && l.deliverer == nil {
			// Nothing queued can use the credit: consume it (part 2.6.7).
			l.deliveryCount += l.credit
			l.credit = 0
			c.writeFrameLocked(s.channel, s.flowLocked(l))
		}
	}
	if f.Echo {
		c.writeFrameLocked(s.channel, s.flowLocked(l))
	}
	s.notifyAllLocked()
	return nil
}

// notifyAllLocked wakes delivery goroutines after credit or window grew.
func (s *session) notifyAllLocked() {
	for _, l := range s.links {
		l.notify()
	}
}

func (s *session) onAttach(a *amqp.Attach) error {
	c := s.c
	c.mu.Lock()
	if old, dup := s.links[a.Handle]; dup && !old.detached {
		c.mu.Unlock()
		return errProto(amqp.ErrHandleInUse, "attach on handle %d, which is in use", a.Handle)
	}
	delete(s.gone, a.Handle)
	c.mu.Unlock()
	// Node resolution may touch hub state and epochs; do it without
	// conn.mu so a steal that detaches links of this connection cannot
	// deadlock.
	l := newLink(s, a)
	attachErr := c.srv.resolveNode(l, a)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		if l.cleanup != nil {
			defer l.cleanup()
		}
		return nil
	}
	s.links[a.Handle] = l
	reply := &amqp.Attach{
		Name:          a.Name,
		Handle:        a.Handle,
		Role:          !a.Role,
		SndSettleMode: a.SndSettleMode,
		RcvSettleMode: a.RcvSettleMode,
		// Always a map, never null: pyamqp merges it into its own link
		// properties with dict.update.
		Properties: amqp.Map{},
	}
	if attachErr != nil {
		// Rejection per the spec: null terminus, then detach with the error.
		c.writeFrameLocked(s.channel, reply)
		l.detached = true
		c.writeFrameLocked(s.channel, &amqp.Detach{Handle: a.Handle, Closed: true, Error: attachErr})
		return nil
	}
	reply.Source, reply.Target = a.Source, a.Target
	if l.serverSends() {
		zero := uint32(0)
		reply.InitialDeliveryCount = &zero
		if a.SndSettleMode == nil {
			settled := amqp.SndSettled
			reply.SndSettleMode = &settled
		}
	} else {
		reply.MaxMessageSize = uint64(c.srv.cfg.maxMessageSize())
		if a.InitialDeliveryCount != nil {
			l.deliveryCount = *a.InitialDeliveryCount
		}
	}
	c.writeFrameLocked(s.channel, reply)
	if !l.serverSends() {
		l.credit = linkCredit
		c.writeFrameLocked(s.channel, s.flowLocked(l))
	}
	if l.start != nil {
		l.start()
	}
	return nil
}

func (s *session) onDetach(d *amqp.Detach) error {
	c := s.c
	c.mu.Lock()
	l := s.links[d.Handle]
	if l == nil {
		gone := s.isGoneLocked(d.Handle)
		c.mu.Unlock()
		if gone {
			return nil
		}
		return errProto(amqp.ErrUnattachedHandle, "detach for unknown handle %d", d.Handle)
	}
	s.forgetLocked(d.Handle)
	wasDetached := l.detached
	cleanup := l.detachLocked()
	if !wasDetached {
		c.writeFrameLocked(s.channel, &amqp.Detach{Handle: d.Handle, Closed: true})
	}
	c.mu.Unlock()
	if cleanup != nil {
		cleanup()
	}
	return nil
}

// detachAllLocked implicitly detaches every link of an ending session and
// returns their cleanups, to run without conn.mu.
func (s *session) detachAllLocked() []func() {
	var out []func()
	for h, l := range s.links {
		if f := l.detachLocked(); f != nil {
			out = append(out, f)
		}
		delete(s.links, h)
	}
	return out
}

func (s *session) onTransfer(t *amqp.Transfer, payload []byte) error {
	c := s.c
	c.mu.Lock()
	if s.incomingWindow == 0 {
		c.mu.Unlock()
		return errProto(amqp.ErrWindowViolation, "transfer beyond the session incoming window")
	}
	s.nextIncomingID++
	s.incomingWindow--
	if s.incomingWindow < sessionWindow/2 {
		s.incomingWindow = sessionWindow
		c.writeFrameLocked(s.channel, s.flowLocked(nil))
	}
	l := s.links[t.Handle]
	if l == nil {
		gone := s.isGoneLocked(t.Handle)
		c.mu.Unlock()
		if gone {
			return nil
		}
		return errProto(amqp.ErrUnattachedHandle, "transfer for unknown handle %d", t.Handle)
	}
	if l.serverSends() {
		c.mu.Unlock()
		return errProto(amqp.ErrNotAllowed, "transfer on handle %d, where the server is the sender", t.Handle)
	}
	if l.detached {
		c.mu.Unlock()
		return nil // in flight when we detached
	}
	msg, done, err := l.assembleLocked(t, payload)
	c.mu.Unlock()
	if err != nil || !done {
		return err
	}
	if t.Aborted {
		return nil
	}
	l.onMessage(l, msg)
	return nil
}
