package emulator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

// rawConn is a hand-driven AMQP client for protocol-error tests.
type rawConn struct {
	t        testing.TB
	nc       net.Conn
	buf      []byte
	openBody []byte // the server's open frame body, as sent
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(testTimeout))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

func (r *rawConn) write(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

func (r *rawConn) writeFrame(typ uint8, ch uint16, p amqp.Performative) {
	r.t.Helper()
	b, err := amqp.AppendFrame(nil, typ, ch, p, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

func (r *rawConn) readHeader() {
	r.t.Helper()
	for len(r.buf) < 8 {
		r.fill()
	}
	if _, err := amqp.ParseProtocolHeader(r.buf); err != nil {
		r.t.Fatal(err)
	}
	r.buf = r.buf[8:]
}

func (r *rawConn) fill() error {
	var tmp [4096]byte
	n, err := r.nc.Read(tmp[:])
	r.buf = append(r.buf, tmp[:n]...)
	return err
}

// readFrame returns the next non-empty frame's performative, or nil at EOF.
func (r *rawConn) readFrame() amqp.Performative {
	r.t.Helper()
	p, _, _ := r.readFull()
	return p
}

// readFull returns the next non-empty frame's performative, its payload
// (transfers) and its raw body, or nil at EOF.
func (r *rawConn) readFull() (amqp.Performative, []byte, []byte) {
	r.t.Helper()
	for {
		f, n, err := amqp.NextFrame(r.buf, 1<<24)
		if err != nil {
			r.t.Fatalf("server sent a bad frame: %v", err)
		}
		if n == 0 {
			if err := r.fill(); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
					return nil, nil, nil
				}
				r.t.Fatalf("read: %v", err)
			}
			continue
		}
		body := append([]byte(nil), f.Body...)
		r.buf = r.buf[n:]
		if len(body) == 0 {
			continue
		}
		p, payload, err := amqp.DecodeBody(f.Header.Type, body)
		if err != nil {
			r.t.Fatalf("server sent an undecodable frame: %v", err)
		}
		return p, payload, body
	}
}

func isReset(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

// handshake runs SASL ANONYMOUS and open like the SDK does.
func (r *rawConn) handshake() {
	r.t.Helper()
	r.write(amqp.ProtocolHeader(amqp.ProtoSASL))
	r.readHeader()
	if _, ok := r.readFrame().(*amqp.SASLMechanisms); !ok {
		r.t.Fatal("no sasl-mechanisms")
	}
	r.writeFrame(amqp.FrameSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS", InitialResponse: []byte("anonymous")})
	if o, ok := r.readFrame().(*amqp.SASLOutcome); !ok || o.Code != amqp.SASLOK {
		r.t.Fatal("no ok sasl-outcome")
	}
	r.write(amqp.ProtocolHeader(amqp.ProtoAMQP))
	r.readHeader()
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Open{ContainerID: "raw", MaxFrameSize: 65536})
	p, _, body := r.readFull()
	if _, ok := p.(*amqp.Open); !ok {
		r.t.Fatal("no open")
	}
	r.openBody = body
}

func frameBytes(t testing.TB, ch uint16, p amqp.Performative) []byte {
	b, err := amqp.AppendFrame(nil, amqp.FrameAMQP, ch, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// malformedStreams are byte streams sent after a good handshake; each must
// make the server close the connection with an AMQP error.
func malformedStreams(t testing.TB) []struct {
	name string
	b    []byte
} {
	begin := frameBytes(t, 0, &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10})
	h := uint32(9)
	return []struct {
		name string
		b    []byte
	}{
		{"frame size below 8", []byte{0, 0, 0, 4, 2, 0, 0, 0}},
		{"frame above max-frame-size", []byte{0x7f, 0, 0, 0, 2, 0, 0, 0}},
		{"bad data offset", []byte{0, 0, 0, 8, 1, 0, 0, 0}},
		{"garbage body", []byte{0, 0, 0, 12, 2, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}},
		{"unknown performative", []byte{0, 0, 0, 12, 2, 0, 0, 0, 0x00, 0x53, 0x30, 0x45}},
		{"sasl frame after open", frameBytes(t, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS"})[:0:0]},
		{"attach without session", frameBytes(t, 3, &amqp.Attach{Name: "x", Role: amqp.RoleReceiver})},
		{"second open", frameBytes(t, 0, &amqp.Open{ContainerID: "again"})},
		{"begin twice", append(append([]byte(nil), begin...), begin...)},
		{"flow for unknown handle", append(append([]byte(nil), begin...), frameBytes(t, 0, &amqp.Flow{Handle: &h, IncomingWindow: 1, OutgoingWindow: 1})...)},
		{"transfer for unknown handle", append(append([]byte(nil), begin...), frameBytes(t, 0, &amqp.Transfer{Handle: 4})...)},
	}
}

// TestMalformedInputClosesOnlyThatConnection sends each malformed stream
// on its own connection and expects close with an AMQP error, while an SDK
// client on another connection keeps working.
func TestMalformedInputClosesOnlyThatConnection(t *testing.T) {
	srv := startEmulator(t, Config{}, expectProtocolErrors{})
	p := newProducer(t, srv, "orders")
	sendEvents(t, p, nil, "before")
	streams := malformedStreams(t)
	saslAfterOpen, _ := amqp.AppendFrame(nil, amqp.FrameSASL, 0, &amqp.SASLInit{Mechanism: "ANONYMOUS"}, nil)
	for _, tc := range streams {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			if tc.name == "sasl frame after open" {
				b = saslAfterOpen
			}
			r := dialRaw(t, srv.Addr())
			r.handshake()
			r.write(b)
			var last amqp.Performative
			for {
				p := r.readFrame()
				if p == nil {
					break
				}
				last = p
			}
			cl, ok := last.(*amqp.Close)
			if !ok || cl.Error == nil || cl.Error.Condition == "" {
				t.Fatalf("last frame before EOF = %#v, want close with an error", last)
			}
		})
	}
	t.Run("bad protocol header", func(t *testing.T) {
		r := dialRaw(t, srv.Addr())
		r.write([]byte("GET / HTTP/1.1\r\n\r\n"))
		r.readHeader() // the server answers with the header it speaks, then closes
		if p := r.readFrame(); p != nil {
			t.Fatalf("got %T after the header, want EOF", p)
		}
	})
	sendEvents(t, p, nil, "after") // the SDK connection is unaffected
	ctx := testCtx(t)
	if _, err := p.GetEventHubProperties(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// FuzzConnection writes arbitrary bytes after a good handshake. The server
// must never panic and must close the connection once the client stops
// writing; a healthy connection on the side keeps working.
func FuzzConnection(f *testing.F) {
	for _, tc := range malformedStreams(f) {
		f.Add(tc.b)
	}
	f.Add(frameBytes(f, 0, &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10}))
	f.Add(bytes.Repeat([]byte{0, 0, 0, 8, 2, 0, 0, 0}, 3))
	srv, err := Start(context.Background(), Config{Hubs: []HubConfig{{Name: "orders", Partitions: 2}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Shutdown(context.Background()) })
	healthy := dialRaw(f, srv.Addr())
	healthy.handshake()
	f.Fuzz(func(t *testing.T, b []byte) {
		r := dialRaw(t, srv.Addr())
		r.handshake()
		r.nc.Write(b) // the server may already have closed on a prefix
		r.nc.(*net.TCPConn).CloseWrite()
		r.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		var tmp [4096]byte
		for {
			_, err := r.nc.Read(tmp[:])
			if err == nil {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the connection open after the client finished")
			}
			break
		}
		// The side connection still answers: begin gets a begin.
		healthy.t = t
		healthy.writeFrame(amqp.FrameAMQP, 0, &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10})
		if _, ok := healthy.readFrame().(*amqp.Begin); !ok {
			t.Fatal("the healthy connection stopped answering")
		}
		healthy.writeFrame(amqp.FrameAMQP, 0, &amqp.End{})
		if _, ok := healthy.readFrame().(*amqp.End); !ok {
			t.Fatal("the healthy connection did not end its session")
		}
	})
}
