package emulator

import (
	"encoding/binary"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

// linkCredit is the credit the server grants to client senders, topped up
// when half is used.
const linkCredit = 1000

// delivery is one complete message received from a client.
type delivery struct {
	id       uint32
	settled  bool // pre-settled by the client: no disposition expected
	format   uint32
	payload  []byte
	tooLarge bool
}

// link is one attached link. Fields are guarded by conn.mu unless noted.
type link struct {
	s      *session
	name   string
	handle uint32
	role   bool // the client's role (amqp.RoleSender: the client sends)
	source *amqp.Source
	target *amqp.Target
	props  amqp.Map

	detached bool

	// What the link's attach was authorized for (auth.go); authNeed is 0
	// when tokens are not checked or the node needs none.
	authEntity string
	authNeed   Rights

	// Flow state. When the client sends, deliveryCount and credit are what
	// we granted; when the server sends, they are ours and the client's.
	deliveryCount uint32
	credit        uint32

	// Client → server message being assembled from multi-frame transfers.
	partial *delivery

	// Node behaviour, set by resolveNode before the link is registered.
	onMessage func(l *link, d *delivery) // client-sender links; runs on the read goroutine without conn.mu
	start     func()                     // runs under conn.mu after the attach reply
	cleanup   func()                     // runs once without conn.mu after detach
	deliverer *deliverer                 // partition receiver state, when this is one

	wakeCh chan struct{} // cap 1; wakes the delivery goroutine
}

func newLink(s *session, a *amqp.Attach) *link {
	return &link{
		s:      s,
		name:   a.Name,
		handle: a.Handle,
		role:   a.Role,
		source: a.Source,
		target: a.Target,
		props:  a.Properties,
		wakeCh: make(chan struct{}, 1),
	}
}

// serverSends reports whether the server is this link's sender.
func (l *link) serverSends() bool { return l.role == amqp.RoleReceiver }

func (l *link) notify() {
	select {
	case l.wakeCh <- struct{}{}:
	default:
	}
}

// detachLocked marks the link detached and returns its cleanup (to run
// without conn.mu), at most once.
func (l *link) detachLocked() func() {
	l.detached = true
	l.notify()
	f := l.cleanup
	l.cleanup = nil
	return f
}

// assembleLocked adds one transfer frame to the current delivery and
// returns it when complete. Messages over the max message size are
// drained but not kept, and rejected once complete.
func (l *link) assembleLocked(t *amqp.Transfer, payload []byte) (*delivery, bool, error) {
	c := l.s.c
	d := l.partial
	if d == nil {
		if t.DeliveryID == nil {
			return nil, false, errProto(amqp.ErrNotAllowed, "first transfer of a delivery on handle %d has no delivery-id", l.handle)
		}
		if l.credit == 0 {
			return nil, false, errProto(amqp.ErrTransferLimit, "transfer on handle %d without link credit", l.handle)
		}
		d = &delivery{id: *t.DeliveryID, settled: t.Settled}
		if t.MessageFormat != nil {
			d.format = *t.MessageFormat
		}
		l.partial = d
	}
	d.settled = d.settled || t.Settled
	if !d.tooLarge {
		if int64(len(d.payload)+len(payload)) > c.srv.cfg.maxMessageSize() {
			d.tooLarge, d.payload = true, nil
		} else {
			d.payload = append(d.payload, payload...)
		}
	}
	if t.More && !t.Aborted {
		return nil, false, nil
	}
	l.partial = nil
	l.deliveryCount++
	l.credit--
	if l.credit < linkCredit/2 {
		l.credit = linkCredit
		c.writeFrameLocked(l.s.channel, l.s.flowLocked(l))
	}
	return d, true, nil
}

// settle sends the disposition for a client delivery, unless the client
// pre-settled it.
func (l *link) settle(d *delivery, state amqp.DeliveryState) {
	if d.settled {
		return
	}
	c := l.s.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeFrameLocked(l.s.channel, &amqp.Disposition{Role: amqp.RoleReceiver, First: d.id, Settled: true, State: state})
}

// detachWithError detaches the link from the server side (closed=true).
// It returns false when the link was already detached.
func (l *link) detachWithError(e *amqp.Error) bool {
	c := l.s.c
	c.mu.Lock()
	if l.detached || c.closing {
		c.mu.Unlock()
		return false
	}
	cleanup := l.detachLocked()
	c.writeFrameLocked(l.s.channel, &amqp.Detach{Handle: l.handle, Closed: true, Error: e})
	c.mu.Unlock()
	if cleanup != nil {
		cleanup()
	}
	return true
}

// sendMessageLocked sends one pre-settled message on a server-sender
// link, split into frames that fit the client's max-frame-size. The
// caller checked credit and window. wait applies output backpressure.
func (l *link) sendMessageLocked(msg []byte, tag uint64) {
	s := l.s
	c := s.c
	id := s.nextDeliveryID
	s.nextDeliveryID++
	l.deliveryCount++
	l.credit--
	var tagBuf [8]byte
	binary.BigEndian.PutUint64(tagBuf[:], tag)
	format := uint32(0)
	first := &amqp.Transfer{Handle: l.handle, DeliveryID: &id, DeliveryTag: tagBuf[:], MessageFormat: &format, Settled: true}
	// Performative overhead is well under 64 bytes; keep a margin.
	room := int(c.peerMaxFrame) - amqp.HeaderSize - 64
	c.appendOut(false, func(dst []byte) []byte {
		t := first
		for {
			chunk := msg
			if len(chunk) > room {
				chunk = chunk[:room]
			}
			msg = msg[len(chunk):]
			t.More = len(msg) > 0
			out, err := amqp.AppendFrame(dst, amqp.FrameAMQP, s.channel, t, chunk)
			if err != nil {
				c.log.Error("encode transfer", "err", err)
				return dst
			}
			dst = out
			s.nextOutgoingID++
			s.remoteIncomingWindow--
			if len(msg) == 0 {
				return dst
			}
			t = &amqp.Transfer{Handle: l.handle}
		}
	})
}

// framesFor returns how many transfer frames a message of n bytes needs.
func (c *conn) framesFor(n int) uint32 {
	room := int(c.peerMaxFrame) - amqp.HeaderSize - 64
	if n <= room {
		return 1
	}
	return uint32((n + room - 1) / room)
}
