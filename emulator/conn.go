package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

const (
	// maxFrameIn is the max-frame-size the server announces: large enough
	// that a 1 MiB batch needs at most two frames.
	maxFrameIn = 1 << 20
	// idleTimeoutMs is the idle-time-out the server announces; clients then
	// send an empty frame every half of it.
	idleTimeoutMs = 60000
	// readIdleLimit closes connections whose peer sent nothing for twice
	// the announced idle timeout.
	readIdleLimit = 2 * idleTimeoutMs * time.Millisecond
	// writeTimeout bounds one socket write so a client that stops reading
	// cannot pin a connection forever.
	writeTimeout = 30 * time.Second
	// maxPendingOut is the output buffer size above which deliveries wait
	// for the writer (protocol replies never wait).
	maxPendingOut = 4 << 20
)

// closeReason says why a connection ended. It is logged, and tests use it
// to tell protocol errors from client closes.
type closeReason int

const (
	closeNone          closeReason = iota
	closeClient                    // the client sent close or hung up
	closeProtocolError             // malformed or illegal input
	closeIOError                   // the socket failed
	closeShutdown                  // Server.Shutdown
	closeDropped                   // fault injection: DropConnections
	closeIdle                      // nothing read for readIdleLimit
)

func (r closeReason) String() string {
	switch r {
	case closeClient:
		return "client"
	case closeProtocolError:
		return "protocol-error"
	case closeIOError:
		return "io-error"
	case closeShutdown:
		return "shutdown"
	case closeDropped:
		return "dropped"
	case closeIdle:
		return "idle"
	}
	return "none"
}

// protoError is a connection-level protocol violation: the connection is
// closed with this AMQP error.
type protoError struct{ err *amqp.Error }

func (e *protoError) Error() string { return e.err.Error() }

func errProto(cond amqp.Symbol, format string, args ...any) error {
	return &protoError{&amqp.Error{Condition: cond, Description: fmt.Sprintf(format, args...)}}
}

// conn is one client connection. Its read goroutine (serve) does all
// protocol processing; see the package comment for the other goroutines.
type conn struct {
	srv *Server
	nc  net.Conn
	log *slog.Logger

	// ctx is cancelled when the connection is torn down; delivery
	// goroutines derive from it. It is a lifetime, owned by serve.
	ctx    context.Context
	cancel context.CancelFunc

	peerMaxFrame uint32 // the client's max-frame-size: our outgoing frame limit; set before any session exists

	mu        sync.Mutex          // guards the fields below and all session and link state
	sessions  map[uint16]*session // by channel (the server uses the client's channel number)
	ended     map[uint16]struct{} // channels whose session the client ended and has not begun again
	opened    bool                // open exchanged; a close frame may be sent
	closing   bool                // teardown started; send nothing more
	reason    closeReason
	claims    map[string]claim // accepted tokens by audience path (auth.go)
	authTimer *time.Timer      // fires checkExpiry at the earliest claim expiry

	outMu     sync.Mutex // guards out, outClosed; signals space
	space     *sync.Cond // broadcast when the writer drains out
	out       []byte
	outClosed bool
	wake      chan struct{} // cap 1: tells the writer out has data
	flushed   chan struct{} // closed by the writer when it exits

	wg sync.WaitGroup // delivery goroutines of this connection
}

func newConn(srv *Server, nc net.Conn) *conn {
	c := &conn{
		srv:          srv,
		nc:           nc,
		log:          srv.log.With("remote", nc.RemoteAddr().String()),
		peerMaxFrame: amqp.MinMaxFrameSize,
		sessions:     map[uint16]*session{},
		ended:        map[uint16]struct{}{},
		wake:         make(chan struct{}, 1),
		flushed:      make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.space = sync.NewCond(&c.outMu)
	return c
}

// serve runs the connection to completion: handshake, then the read loop.
// It returns after every goroutine of the connection has exited.
func (c *conn) serve() {
	defer c.cancel()
	buf, err := c.handshake()
	if err != nil {
		c.log.Debug("handshake failed", "err", err)
		if closeReasonOf(err) == closeProtocolError {
			c.srv.noteProtocolError(err)
		}
		c.teardown(closeReasonOf(err), nil)
	} else {
		go c.writeLoop()
		err = c.readLoop(buf)
		var pe *protoError
		switch {
		case errors.Is(err, errClientClosed):
			// Answer the client's close (part 2.4.3) before tearing down.
			c.mu.Lock()
			c.writeFrameLocked(0, &amqp.Close{})
			c.mu.Unlock()
			c.teardown(closeClient, nil)
		case errors.As(err, &pe) && c.closedReason() != closeNone:
			// Torn down already (a write failed as the client hung up)
			// while frames it sent before were still being read: the
			// session they miss was dropped by the teardown, not by the
			// client.
			c.log.Debug("frame after teardown", "err", err)
		case errors.As(err, &pe):
			c.log.Warn("closing connection on protocol error", "err", err)
			c.srv.noteProtocolError(err)
			c.teardown(closeProtocolError, pe.err)
		default:
			c.teardown(closeReasonOf(err), nil)
		}
		<-c.flushed
	}
	c.nc.Close()
	c.wg.Wait()
	reason := c.closedReason()
	if reason == closeIOError || reason == closeIdle {
		c.srv.dropped.Add(1)
	}
	c.log.Debug("connection closed", "reason", reason)
}

func closeReasonOf(err error) closeReason {
	var pe *protoError
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, errClientClosed):
		return closeClient
	case errors.As(err, &pe):
		return closeProtocolError
	case errors.Is(err, errIdle):
		return closeIdle
	}
	return closeIOError
}

var (
	errClientClosed = errors.New("client closed the connection")
	errIdle         = errors.New("client idle too long")
	errTornDown     = errors.New("connection already torn down")
)

func (c *conn) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *conn) closedReason() closeReason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

// teardown ends the connection once: it sends close (with amqpErr when
// set and open was exchanged), detaches every link implicitly, and lets
// the writer flush and exit. Safe from any goroutine.
func (c *conn) teardown(reason closeReason, amqpErr *amqp.Error) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.reason = reason
	if c.authTimer != nil {
		c.authTimer.Stop()
	}
	sendClose := c.opened && reason != closeDropped && reason != closeIOError
	var cleanups []func()
	for ch, s := range c.sessions {
		cleanups = append(cleanups, s.detachAllLocked()...)
		delete(c.sessions, ch)
	}
	if sendClose && reason != closeClient {
		c.writeFrameLocked(0, &amqp.Close{Error: amqpErr})
	}
	c.mu.Unlock()
	c.cancel()
	for _, f := range cleanups {
		f()
	}
	c.outMu.Lock()
	c.outClosed = true
	c.space.Broadcast()
	c.outMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	if reason == closeDropped || reason == closeShutdown && !sendClose {
		c.nc.Close()
	}
}

// drop closes the socket at once, without a close frame (fault injection).
func (c *conn) drop() {
	c.teardown(closeDropped, nil)
	c.nc.Close()
}

// handshake performs the protocol-header, SASL and open exchanges with
// direct socket I/O (the writer does not run yet). It returns bytes read
// past the open frame.
func (c *conn) handshake() ([]byte, error) {
	deadline := time.Now().Add(readIdleLimit)
	c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})
	var buf []byte
	hdr, buf, err := c.readProtoHeader(buf)
	if err != nil {
		return nil, err
	}
	if hdr == amqp.ProtoSASL {
		if _, err := c.nc.Write(amqp.ProtocolHeader(amqp.ProtoSASL)); err != nil {
			return nil, err
		}
		if buf, err = c.sasl(buf); err != nil {
			return nil, err
		}
		if hdr, buf, err = c.readProtoHeader(buf); err != nil {
			return nil, err
		}
	}
	if hdr != amqp.ProtoAMQP {
		// Answer with the header we support, then close (part 2.2).
		c.nc.Write(amqp.ProtocolHeader(amqp.ProtoAMQP))
		return nil, errProto(amqp.ErrNotImplemented, "unsupported protocol id %d", hdr)
	}
	if _, err := c.nc.Write(amqp.ProtocolHeader(amqp.ProtoAMQP)); err != nil {
		return nil, err
	}
	f, buf, err := c.readFrameDirect(buf)
	if err != nil {
		return nil, err
	}
	p, _, err := amqp.DecodeBody(f.Header.Type, f.Body)
	if err != nil {
		return nil, c.closeDuringOpen(errProto(amqp.ErrDecode, "open: %v", err))
	}
	open, ok := p.(*amqp.Open)
	if !ok || f.Header.Type != amqp.FrameAMQP {
		return nil, c.closeDuringOpen(errProto(amqp.ErrNotAllowed, "expected open, got %T", p))
	}
	if open.MaxFrameSize < amqp.MinMaxFrameSize {
		return nil, c.closeDuringOpen(errProto(amqp.ErrInvalidField, "max-frame-size %d below 512", open.MaxFrameSize))
	}
	c.peerMaxFrame = open.MaxFrameSize
	c.log = c.log.With("container", open.ContainerID)
	reply, err := amqp.AppendFrame(nil, amqp.FrameAMQP, 0, serverOpen(), nil)
	if err != nil {
		return nil, fmt.Errorf("encode open: %w", err)
	}
	if _, err := c.nc.Write(reply); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.opened = true
	c.mu.Unlock()
	return buf, nil
}

// serverOpen is the server's open frame. Every field a client may read
// is set, since some clients index the field list without defaults.
func serverOpen() *amqp.Open {
	return &amqp.Open{
		ContainerID:  "ehsink-emulator",
		MaxFrameSize: maxFrameIn,
		ChannelMax:   65535,
		IdleTimeout:  idleTimeoutMs,
	}
}

// closeDuringOpen answers a bad open with our open and a close carrying
// the error, as the spec requires before closing.
func (c *conn) closeDuringOpen(err error) error {
	var pe *protoError
	if errors.As(err, &pe) {
		b, _ := amqp.AppendFrame(nil, amqp.FrameAMQP, 0, serverOpen(), nil)
		b, _ = amqp.AppendFrame(b, amqp.FrameAMQP, 0, &amqp.Close{Error: pe.err}, nil)
		c.nc.Write(b)
	}
	return err
}

func (c *conn) readProtoHeader(buf []byte) (uint8, []byte, error) {
	for len(buf) < amqp.HeaderSize {
		var err error
		if buf, err = c.readMore(buf); err != nil {
			return 0, nil, err
		}
	}
	id, err := amqp.ParseProtocolHeader(buf)
	if err != nil {
		c.nc.Write(amqp.ProtocolHeader(amqp.ProtoSASL))
		return 0, nil, errProto(amqp.ErrDecode, "%v", err)
	}
	return id, buf[amqp.HeaderSize:], nil
}

func (c *conn) readMore(buf []byte) ([]byte, error) {
	if cap(buf)-len(buf) < 4096 {
		nb := make([]byte, len(buf), 2*cap(buf)+8192)
		copy(nb, buf)
		buf = nb
	}
	n, err := c.nc.Read(buf[len(buf):cap(buf)])
	buf = buf[:len(buf)+n]
	if n > 0 {
		return buf, nil
	}
	return buf, err
}

// readFrameDirect reads one frame during the handshake, skipping
// heartbeats. The frame body is copied so buf may be reused.
func (c *conn) readFrameDirect(buf []byte) (amqp.Frame, []byte, error) {
	for {
		f, n, err := amqp.NextFrame(buf, maxFrameIn)
		if err != nil {
			return f, nil, errProto(amqp.ErrFramingError, "%v", err)
		}
		if n == 0 {
			if buf, err = c.readMore(buf); err != nil {
				return f, nil, err
			}
			continue
		}
		f.Body = append([]byte(nil), f.Body...)
		rest := append([]byte(nil), buf[n:]...)
		if len(f.Body) == 0 {
			buf = rest
			continue
		}
		return f, rest, nil
	}
}

// sasl runs the SASL exchange: mechanisms, init, outcome.
func (c *conn) sasl(buf []byte) ([]byte, error) {
	mechs, err := amqp.AppendFrame(nil, amqp.FrameSASL, 0, &amqp.SASLMechanisms{
		Mechanisms: []amqp.Symbol{"ANONYMOUS", "PLAIN"},
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("encode sasl-mechanisms: %w", err)
	}
	if _, err := c.nc.Write(mechs); err != nil {
		return nil, err
	}
	f, buf, err := c.readFrameDirect(buf)
	if err != nil {
		return nil, err
	}
	p, _, err := amqp.DecodeBody(f.Header.Type, f.Body)
	if err != nil {
		return nil, errProto(amqp.ErrDecode, "sasl-init: %v", err)
	}
	init, ok := p.(*amqp.SASLInit)
	if !ok || f.Header.Type != amqp.FrameSASL {
		return nil, errProto(amqp.ErrNotAllowed, "expected sasl-init, got %T", p)
	}
	code := amqp.SASLOK
	switch init.Mechanism {
	case "ANONYMOUS":
	case "PLAIN":
		if !c.srv.checkPlain(init.InitialResponse) {
			code = amqp.SASLAuth
		}
	default:
		code = amqp.SASLAuth
	}
	out, err := amqp.AppendFrame(nil, amqp.FrameSASL, 0, &amqp.SASLOutcome{Code: code}, nil)
	if err != nil {
		return nil, fmt.Errorf("encode sasl-outcome: %w", err)
	}
	if _, err := c.nc.Write(out); err != nil {
		return nil, err
	}
	if code != amqp.SASLOK {
		return nil, fmt.Errorf("sasl %s: authentication failed", init.Mechanism)
	}
	return buf, nil
}

// readLoop reads and processes frames until the connection ends.
func (c *conn) readLoop(buf []byte) error {
	// Own a buffer sized for the largest frame plus a read chunk.
	own := make([]byte, len(buf), 64<<10)
	copy(own, buf)
	buf = own
	start := 0
	for {
		f, n, err := amqp.NextFrame(buf[start:], maxFrameIn)
		if err != nil {
			return errProto(amqp.ErrFramingError, "%v", err)
		}
		if n == 0 {
			// Compact, then read more.
			if start > 0 {
				m := copy(buf, buf[start:])
				buf = buf[:m]
				start = 0
			}
			c.nc.SetReadDeadline(time.Now().Add(readIdleLimit))
			nb, err := c.readMore(buf)
			buf = nb
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					return errIdle
				}
				return err
			}
			continue
		}
		start += n
		if len(f.Body) == 0 {
			continue // heartbeat
		}
		if err := c.handleFrame(f); err != nil {
			return err
		}
	}
}

// handleFrame decodes one frame and dispatches it.
func (c *conn) handleFrame(f amqp.Frame) error {
	if c.isClosing() {
		// Torn down meanwhile (the writer failed because the client hung
		// up, or Shutdown): the sessions are gone, so frames still in the
		// read buffer would look illegal. Stop reading instead.
		return errTornDown
	}
	if f.Header.Type != amqp.FrameAMQP {
		return errProto(amqp.ErrNotAllowed, "frame type %d after open", f.Header.Type)
	}
	p, payload, err := amqp.DecodeBody(f.Header.Type, f.Body)
	if err != nil {
		return errProto(amqp.ErrDecode, "channel %d: %v", f.Header.Channel, err)
	}
	ch := f.Header.Channel
	switch p := p.(type) {
	case *amqp.Close:
		return errClientClosed
	case *amqp.Open:
		return errProto(amqp.ErrNotAllowed, "second open")
	case *amqp.Begin:
		return c.onBegin(ch, p)
	}
	c.mu.Lock()
	s := c.sessions[ch]
	_, ended := c.ended[ch]
	c.mu.Unlock()
	if s == nil && ended {
		// A frame the client sent before it saw our end (pyamqp detaches
		// its links after ending a closing session): late, not illegal.
		c.log.Debug("ignoring frame for an ended session", "performative", fmt.Sprintf("%T", p), "channel", ch)
		return nil
	}
	if s == nil {
		return errProto(amqp.ErrNotAllowed, "%T on channel %d without a session", p, ch)
	}
	switch p := p.(type) {
	case *amqp.End:
		return c.onEnd(s)
	case *amqp.Attach:
		return s.onAttach(p)
	case *amqp.Flow:
		return s.onFlow(p)
	case *amqp.Transfer:
		return s.onTransfer(p, payload)
	case *amqp.Disposition:
		return nil // all server deliveries are pre-settled; client outcomes need no action
	case *amqp.Detach:
		return s.onDetach(p)
	}
	return errProto(amqp.ErrNotImplemented, "unexpected %T", p)
}

func (c *conn) onBegin(ch uint16, b *amqp.Begin) error {
	if b.RemoteChannel != nil {
		return errProto(amqp.ErrNotAllowed, "begin on channel %d carries remote-channel", ch)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.sessions[ch]; dup {
		return errProto(amqp.ErrNotAllowed, "begin on channel %d, which has a session", ch)
	}
	s := newSession(c, ch, b)
	c.sessions[ch] = s
	delete(c.ended, ch)
	c.writeFrameLocked(ch, &amqp.Begin{
		RemoteChannel:  &ch,
		NextOutgoingID: s.nextOutgoingID,
		IncomingWindow: sessionWindow,
		OutgoingWindow: sessionWindow,
		HandleMax:      1<<32 - 1,
	})
	return nil
}

func (c *conn) onEnd(s *session) error {
	c.mu.Lock()
	cleanups := s.detachAllLocked()
	delete(c.sessions, s.channel)
	c.ended[s.channel] = struct{}{}
	c.writeFrameLocked(s.channel, &amqp.End{})
	c.mu.Unlock()
	for _, f := range cleanups {
		f()
	}
	return nil
}

// writeFrameLocked encodes a frame into the output buffer. Callers hold
// c.mu, which orders frames of one session and link. Encoding errors are
// programming errors in this package; they are logged and the frame
// dropped.
func (c *conn) writeFrameLocked(ch uint16, p amqp.Performative) {
	if c.closing {
		if _, isClose := p.(*amqp.Close); !isClose {
			return
		}
	}
	c.appendOut(false, func(dst []byte) []byte {
		out, err := amqp.AppendFrame(dst, amqp.FrameAMQP, ch, p, nil)
		if err != nil {
			c.log.Error("encode frame", "performative", fmt.Sprintf("%T", p), "err", err)
			return dst
		}
		return out
	})
}

// appendOut lets fn append bytes to the output buffer and wakes the
// writer. With wait, it first waits while the buffer is over its limit.
func (c *conn) appendOut(wait bool, fn func(dst []byte) []byte) {
	c.outMu.Lock()
	for wait && len(c.out) > maxPendingOut && !c.outClosed {
		c.space.Wait()
	}
	if c.outClosed {
		c.outMu.Unlock()
		return
	}
	c.out = fn(c.out)
	c.outMu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// writeLoop owns the socket's write side: it flushes the output buffer
// and sends a heartbeat on every tick so idle clients keep the connection.
func (c *conn) writeLoop() {
	defer close(c.flushed)
	tick := time.NewTicker(c.srv.cfg.heartbeat())
	defer tick.Stop()
	var spare []byte
	for {
		select {
		case <-c.wake:
		case <-tick.C:
			c.appendOut(false, amqp.AppendEmptyFrame)
			continue
		}
		c.outMu.Lock()
		data, closed := c.out, c.outClosed
		c.out = spare[:0]
		c.space.Broadcast()
		c.outMu.Unlock()
		if len(data) > 0 {
			c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
			if _, err := c.nc.Write(data); err != nil {
				c.log.Debug("write failed", "err", err)
				c.teardown(closeIOError, nil)
				c.nc.Close() // unblocks the read loop
				return
			}
		}
		spare = data
		if closed {
			c.outMu.Lock()
			rest := len(c.out)
			c.outMu.Unlock()
			if rest == 0 {
				c.nc.Close()
				return
			}
		}
	}
}

// waitSpace blocks while the output buffer is over its limit, so fast
// deliveries cannot grow memory without bound.
func (c *conn) waitSpace() {
	c.outMu.Lock()
	for len(c.out) > maxPendingOut && !c.outClosed {
		c.space.Wait()
	}
	c.outMu.Unlock()
}
