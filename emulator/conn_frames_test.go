package emulator

import (
	"errors"
	"fmt"
	"net"
	"testing"

	goamqp "github.com/Azure/go-amqp"

	"github.com/ehsink/ehsink/emulator/internal/amqp"
)

// Frame-level regressions: each test speaks the exact frame sequence a
// real client sent when it met an emulator bug, through the emulator's
// own codec over TCP.

// expectFrame reads frames until one of type T arrives and returns it
// with its payload and raw body. A close or EOF first fails the test with
// the server's error.
func expectFrame[T amqp.Performative](r *rawConn) (T, []byte, []byte) {
	r.t.Helper()
	for {
		p, payload, body := r.readFull()
		switch p := p.(type) {
		case T:
			return p, payload, body
		case nil:
			r.t.Fatalf("connection ended while waiting for %T", *new(T))
		case *amqp.Close:
			r.t.Fatalf("server closed the connection while waiting for %T: %v", *new(T), p.Error)
		}
	}
}

func (r *rawConn) begin(ch uint16) {
	r.t.Helper()
	r.writeFrame(amqp.FrameAMQP, ch, &amqp.Begin{NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000})
	expectFrame[*amqp.Begin](r)
}

func (r *rawConn) attach(ch uint16, a *amqp.Attach) *amqp.Attach {
	r.t.Helper()
	r.writeFrame(amqp.FrameAMQP, ch, a)
	reply, _, _ := expectFrame[*amqp.Attach](r)
	return reply
}

// grant gives a client-receiver link credit.
func (r *rawConn) grant(ch uint16, handle, credit uint32) {
	r.t.Helper()
	next, dc := uint32(0), uint32(0)
	r.writeFrame(amqp.FrameAMQP, ch, &amqp.Flow{
		NextIncomingID: &next, IncomingWindow: 5000, NextOutgoingID: 0, OutgoingWindow: 5000,
		Handle: &handle, DeliveryCount: &dc, LinkCredit: &credit,
	})
}

// transfer sends one settled message on a client-sender link.
func (r *rawConn) transfer(ch uint16, handle, id uint32, msg []byte) {
	r.t.Helper()
	format := uint32(0)
	b, err := amqp.AppendFrame(nil, amqp.FrameAMQP, ch, &amqp.Transfer{
		Handle: handle, DeliveryID: &id, DeliveryTag: []byte(fmt.Sprint(id)), MessageFormat: &format, Settled: true,
	}, msg)
	if err != nil {
		r.t.Fatal(err)
	}
	r.write(b)
}

// stillServes proves the connection survived everything sent so far:
// frames are processed in order, so a begin answered by a begin means
// nothing before it closed the connection.
func (r *rawConn) stillServes(ch uint16) {
	r.t.Helper()
	r.begin(ch)
	r.writeFrame(amqp.FrameAMQP, ch, &amqp.End{})
	expectFrame[*amqp.End](r)
}

func receiverAttach(name string, handle uint32, source string) *amqp.Attach {
	return &amqp.Attach{Name: name, Handle: handle, Role: amqp.RoleReceiver, Source: &amqp.Source{Address: source}}
}

func senderAttach(name string, handle uint32, target string) *amqp.Attach {
	return &amqp.Attach{Name: name, Handle: handle, Role: amqp.RoleSender, Source: &amqp.Source{Address: name}, Target: &amqp.Target{Address: target}}
}

// TestLateFramesForDetachedHandleIgnored replays what go-amqp 1.5.0 sends
// when a PartitionClient closes while its receiver still drains prefetched
// transfers: DETACH handle=0 closed=true, then FLOW handle=0, then END.
// The late frame must be ignored; closing the connection for it would
// take down every other link of the client.
func TestLateFramesForDetachedHandleIgnored(t *testing.T) {
	srv := startEmulator(t, Config{})
	h := uint32(0)
	next, credit, dc := uint32(0), uint32(300), uint32(0)
	late := map[string]struct {
		attach *amqp.Attach
		frame  func(r *rawConn)
	}{
		"flow": {receiverAttach("r0", h, "orders/ConsumerGroups/$Default/Partitions/0"), func(r *rawConn) {
			r.writeFrame(amqp.FrameAMQP, 0, &amqp.Flow{
				NextIncomingID: &next, IncomingWindow: 5000, NextOutgoingID: 0, OutgoingWindow: 5000,
				Handle: &h, DeliveryCount: &dc, LinkCredit: &credit,
			})
		}},
		"transfer": {senderAttach("s0", h, "orders"), func(r *rawConn) { r.transfer(0, h, 0, eventBytes(t, "late")) }},
		"disposition": {receiverAttach("r0", h, "orders/ConsumerGroups/$Default/Partitions/0"), func(r *rawConn) {
			r.writeFrame(amqp.FrameAMQP, 0, &amqp.Disposition{Role: amqp.RoleReceiver, First: 0, Settled: true, State: &amqp.Accepted{}})
		}},
		"second detach": {receiverAttach("r0", h, "orders/ConsumerGroups/$Default/Partitions/0"), func(r *rawConn) {
			r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: h, Closed: true})
		}},
	}
	for name, tc := range late {
		t.Run(name, func(t *testing.T) {
			r := dialRaw(t, srv.Addr())
			r.handshake()
			r.begin(0)
			r.attach(0, tc.attach)
			r.grant(0, h, 300)
			r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: h, Closed: true})
			expectFrame[*amqp.Detach](r)
			tc.frame(r)
			r.writeFrame(amqp.FrameAMQP, 0, &amqp.End{})
			expectFrame[*amqp.End](r)
			r.stillServes(1)
		})
	}
	// Reattaching the handle makes it live again: frames for it count.
	t.Run("reattached handle is live", func(t *testing.T) {
		r := dialRaw(t, srv.Addr())
		r.handshake()
		r.begin(0)
		r.attach(0, senderAttach("s0", h, "orders"))
		r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: h, Closed: true})
		expectFrame[*amqp.Detach](r)
		r.attach(0, senderAttach("s1", h, "orders"))
		r.transfer(0, h, 0, eventBytes(t, "after reattach"))
		r.stillServes(1)
		c := newConsumer(t, srv, "orders", "", nil)
		pp, err := c.GetEventHubProperties(testCtx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		total := int64(0)
		for _, id := range pp.PartitionIDs {
			p, err := c.GetPartitionProperties(testCtx(t), id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !p.IsEmpty {
				total += p.LastEnqueuedSequenceNumber + 1
			}
		}
		if total != 1 {
			t.Fatalf("hub holds %d events, want the 1 sent after the reattach", total)
		}
	})
}

// TestFramesAfterEndIgnored replays pyamqp closing a session: END, then a
// DETACH (and a FLOW) for a link of that session before it has seen the
// server's END. They must not close the connection.
func TestFramesAfterEndIgnored(t *testing.T) {
	srv := startEmulator(t, Config{})
	r := dialRaw(t, srv.Addr())
	r.handshake()
	r.begin(0)
	r.attach(0, senderAttach("cbs-sender", 0, cbsNode))
	r.attach(0, receiverAttach("cbs-receiver", 1, cbsNode))
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.End{})
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: 0, Closed: true})
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: 1, Closed: true})
	expectFrame[*amqp.End](r)
	h, next := uint32(1), uint32(0)
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Flow{NextIncomingID: &next, IncomingWindow: 1, OutgoingWindow: 1, Handle: &h})
	r.stillServes(1)
	r.stillServes(0) // the ended channel can begin again
}

// wantFields checks that a frame body is a described list of exactly n
// fields, and returns them.
func wantFields(t *testing.T, what string, body []byte, n int) amqp.List {
	t.Helper()
	v, _, err := amqp.Decode(body)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	d, ok := v.(amqp.Described)
	if !ok {
		t.Fatalf("%s: %T, want a described list", what, v)
	}
	l, ok := d.Value.(amqp.List)
	if !ok || len(l) != n {
		t.Fatalf("%s: %d fields (%v), want all %d: pyamqp indexes them without defaults", what, len(l), d.Value, n)
	}
	return l
}

// TestServerFramesCarryEveryField checks the field counts pyamqp relies
// on: it reads open[4], begin[4] (handle-max, compared as a number),
// attach[13] (properties, merged with dict.update), flow[4..6],
// transfer[0..10] with the payload appended at index 11, detach[2].
func TestServerFramesCarryEveryField(t *testing.T) {
	srv := startEmulator(t, Config{})
	p := newProducer(t, srv, "orders")
	sendNumbered(t, p, "0", 0, 1)
	r := dialRaw(t, srv.Addr())
	r.handshake()
	open := wantFields(t, "open", r.openBody, 10)
	if open[2] == nil || open[3] == nil {
		t.Fatalf("open max-frame-size %v channel-max %v: both must be set", open[2], open[3])
	}
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Begin{IncomingWindow: 5000, OutgoingWindow: 5000})
	_, _, body := expectFrame[*amqp.Begin](r)
	begin := wantFields(t, "begin", body, 8)
	if hm, ok := begin[4].(uint32); !ok || hm == 0 {
		t.Fatalf("begin handle-max = %#v, want a uint", begin[4])
	}
	r.writeFrame(amqp.FrameAMQP, 0, receiverAttach("r0", 0, "orders/ConsumerGroups/$Default/Partitions/0"))
	_, _, body = expectFrame[*amqp.Attach](r)
	attach := wantFields(t, "attach", body, 14)
	if _, ok := attach[13].(amqp.Map); !ok {
		t.Fatalf("attach properties = %#v, want a map", attach[13])
	}
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Detach{Handle: 0, Closed: true})
	_, _, body = expectFrame[*amqp.Detach](r)
	wantFields(t, "detach", body, 3)

	// A receiver from earliest gets the event as a transfer.
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.Attach{Name: "r1", Handle: 1, Role: amqp.RoleReceiver, Source: &amqp.Source{
		Address: "orders/ConsumerGroups/$Default/Partitions/0",
		Filter:  amqp.Map{{Key: amqp.SelectorFilterKey, Value: amqp.Described{Descriptor: amqp.SelectorFilterCode, Value: "amqp.annotation.x-opt-offset > '-1'"}}},
	}})
	expectFrame[*amqp.Attach](r)
	r.grant(0, 1, 10)
	_, _, body = expectFrame[*amqp.Transfer](r)
	wantFields(t, "transfer", body, 11)

	// A sender gets a flow with its credit.
	r.writeFrame(amqp.FrameAMQP, 0, senderAttach("s0", 2, "orders"))
	expectFrame[*amqp.Attach](r)
	_, _, body = expectFrame[*amqp.Flow](r)
	wantFields(t, "flow", body, 11)
	r.writeFrame(amqp.FrameAMQP, 0, &amqp.End{})
	_, _, body = expectFrame[*amqp.End](r)
	wantFields(t, "end", body, 1)
}

// eventBytes encodes an event as a client sends it.
func eventBytes(t *testing.T, body string) []byte {
	t.Helper()
	b, err := (&goamqp.Message{Data: [][]byte{[]byte(body)}}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rpcRequest encodes a $management READ of the hub (or, with token, a
// $cbs put-token) as a client would.
func rpcRequest(t *testing.T, messageID any, replyTo string, token string) []byte {
	t.Helper()
	m := &goamqp.Message{Properties: &goamqp.MessageProperties{MessageID: messageID}}
	if replyTo != "" {
		m.Properties.ReplyTo = &replyTo
	}
	if token != "" {
		m.ApplicationProperties = map[string]any{"operation": "put-token", "type": "servicebus.windows.net:sastoken", "name": "amqp://127.0.0.1/orders"}
		m.Value = token
	} else {
		m.ApplicationProperties = map[string]any{"operation": "READ", "type": "com.microsoft:eventhub", "name": "orders"}
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRPCReplyRouting sends $cbs and $management requests the way each
// SDK's AMQP stack does and expects the answer on the right link, with
// correlation-id equal to the request's message-id, type included.
func TestRPCReplyRouting(t *testing.T) {
	srv := startEmulator(t, Config{})
	for _, tc := range []struct {
		name      string
		node      string
		rcv       *amqp.Attach // the client's reply link, handle 1
		replyTo   string
		messageID any
		token     string
	}{
		// go-amqp: reply-to is the reply link's target address.
		{"go reply-to target address", managementNode, &amqp.Attach{Name: "go-rcv", Handle: 1, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: managementNode}, Target: &amqp.Target{Address: "go-reply"}}, "go-reply", "0f3c", ""},
		// rhea: reply-to is the reply link's name; the link has no target address.
		{"js reply-to link name cbs", cbsNode, &amqp.Attach{Name: "cbs-5f1e", Handle: 1, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: cbsNode}, Target: &amqp.Target{}}, "cbs-5f1e", "9d2a-js", "SharedAccessSignature sr=x&sig=y&se=0&skn=k"},
		{"js reply-to link name management", managementNode, &amqp.Attach{Name: "mgmt-77", Handle: 1, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: managementNode}}, "mgmt-77", "9d2b-js", ""},
		// pyamqp: no reply-to; message-id is a ulong counter from 0.
		{"python no reply-to cbs", cbsNode, &amqp.Attach{Name: "cbs-rcv", Handle: 1, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: cbsNode}, Target: &amqp.Target{Address: "cbs"}}, "", uint64(0), "SharedAccessSignature sr=x&sig=y&se=0&skn=k"},
		{"python no reply-to management", managementNode, &amqp.Attach{Name: "mgmt-rcv", Handle: 1, Role: amqp.RoleReceiver,
			Source: &amqp.Source{Address: managementNode}, Target: &amqp.Target{Address: "mgmt"}}, "", uint64(0), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRaw(t, srv.Addr())
			r.handshake()
			r.begin(0)
			r.attach(0, senderAttach("req", 0, tc.node))
			expectFrame[*amqp.Flow](r) // the server's credit for the request link
			r.attach(0, tc.rcv)
			r.grant(0, 1, 10)
			r.transfer(0, 0, 0, rpcRequest(t, tc.messageID, tc.replyTo, tc.token))
			tr, payload, _ := expectFrame[*amqp.Transfer](r)
			if tr.Handle != 1 {
				t.Fatalf("reply on handle %d, want the reply link's 1", tr.Handle)
			}
			var resp goamqp.Message
			if err := resp.UnmarshalBinary(payload); err != nil {
				t.Fatal(err)
			}
			if resp.Properties == nil || resp.Properties.CorrelationID != tc.messageID {
				t.Fatalf("correlation-id = %#v, want the message-id %#v with its type", resp.Properties, tc.messageID)
			}
			code, _ := resp.ApplicationProperties["status-code"].(int32)
			if want := map[string]int32{cbsNode: 202, managementNode: 200}[tc.node]; code != want {
				t.Fatalf("status-code %v (%v), want %d", resp.ApplicationProperties["status-code"], resp.ApplicationProperties["status-description"], want)
			}
			r.stillServes(1)
		})
	}
}

// TestFramesAfterTeardownAreNotProtocolErrors: when the writer tears the
// connection down because the client hung up (pyamqp closes its socket
// right after its last detaches), frames still in the read buffer meet a
// connection without sessions. They end the read loop; they are not the
// client's protocol error.
func TestFramesAfterTeardownAreNotProtocolErrors(t *testing.T) {
	srv := startEmulator(t, Config{})
	server, client := net.Pipe()
	defer client.Close()
	c := newConn(srv, server)
	c.opened = true
	if err := c.onBegin(1, &amqp.Begin{IncomingWindow: 10, OutgoingWindow: 10}); err != nil {
		t.Fatal(err)
	}
	c.teardown(closeIOError, nil)
	f, _, err := amqp.NextFrame(frameBytes(t, 1, &amqp.Detach{Handle: 1, Closed: true}), maxFrameIn)
	if err != nil {
		t.Fatal(err)
	}
	var pe *protoError
	if err := c.handleFrame(f); errors.As(err, &pe) {
		t.Fatalf("a frame read after teardown is a protocol error: %v", err)
	}
	if r := c.closedReason(); r != closeIOError {
		t.Fatalf("close reason %s, want io-error", r)
	}
	server.Close()
}
