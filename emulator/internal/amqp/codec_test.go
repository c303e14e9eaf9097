package amqp

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	goamqp "github.com/Azure/go-amqp"
)

// valueCases are values that must survive Append → Decode unchanged.
var valueCases = []struct {
	name string
	v    any
}{
	{"null", nil},
	{"true", true},
	{"false", false},
	{"ubyte", uint8(200)},
	{"ushort", uint16(65000)},
	{"uint0", uint32(0)},
	{"smalluint", uint32(7)},
	{"uint", uint32(1 << 30)},
	{"ulong0", uint64(0)},
	{"smallulong", uint64(255)},
	{"ulong", uint64(math.MaxUint64)},
	{"byte", int8(-5)},
	{"short", int16(-30000)},
	{"smallint", int32(-128)},
	{"int", int32(math.MinInt32)},
	{"smalllong", int64(127)},
	{"long", int64(math.MaxInt64)},
	{"float", float32(1.5)},
	{"double", float64(-2.25)},
	{"char", Char('é')},
	{"timestamp", time.UnixMilli(1700000000123).UTC()},
	{"uuid", UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}},
	{"vbin8", []byte{1, 2, 3}},
	{"vbin32", bytes.Repeat([]byte{9}, 300)},
	{"str8", "héllo"},
	{"str32", string(bytes.Repeat([]byte{'x'}, 70000))},
	{"sym8", Symbol("x-opt-offset")},
	{"decimal64", Decimal{Bits: 64, Bytes: []byte{1, 2, 3, 4, 5, 6, 7, 8}}},
	{"list0", List{}},
	{"list8", List{uint32(1), "a", nil, true}},
	{"list32", List{string(bytes.Repeat([]byte{'y'}, 300)), int64(-1)}},
	{"nested", List{List{Map{{Key: Symbol("k"), Value: List{}}}}}},
	{"map", Map{{Key: Symbol("a"), Value: int64(1)}, {Key: "b", Value: nil}}},
	{"emptymap", Map{}},
	{"array-str", Array{Constructor: codeStr8, Elems: []any{"0", "1", "2"}}},
	{"array-sym32", Array{Constructor: codeSym32, Elems: []any{Symbol(bytes.Repeat([]byte{'s'}, 256))}}},
	{"array-long", Array{Constructor: codeLong, Elems: []any{int64(1), int64(-1)}}},
	{"array-bool", Array{Constructor: codeBool, Elems: []any{true, false}}},
	{"array-list", Array{Constructor: codeList32, Elems: []any{List{uint32(1)}, List{}}}},
	{"array-described", Array{Constructor: codeStr8, Elems: []any{Described{Descriptor: uint64(9), Value: "a"}}}},
	{"described-sym", Described{Descriptor: Symbol("apache.org:selector-filter:string"), Value: "x > '1'"}},
	{"described-ulong", Described{Descriptor: SelectorFilterCode, Value: "amqp.annotation.x-opt-offset > '-1'"}},
}

func TestValueRoundTrip(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Append([]byte{0xee}, tc.v)
			if err != nil {
				t.Fatalf("Append: %v", err)
			}
			if b[0] != 0xee {
				t.Fatal("Append overwrote dst")
			}
			got, n, err := Decode(b[1:])
			if err != nil {
				t.Fatalf("Decode(% x): %v", b[1:min(len(b), 40)], err)
			}
			if n != len(b)-1 {
				t.Fatalf("Decode used %d of %d bytes", n, len(b)-1)
			}
			if !reflect.DeepEqual(got, tc.v) {
				t.Fatalf("round trip: got %#v, want %#v", got, tc.v)
			}
			if sn, err := Skip(b[1:]); err != nil || sn != n {
				t.Fatalf("Skip = %d, %v; want %d", sn, err, n)
			}
		})
	}
}

func TestAppendConvenienceTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"int", 5, int64(5)},
		{"[]string", []string{"0", "1"}, Array{Constructor: codeStr8, Elems: []any{"0", "1"}}},
		{"[]Symbol", []Symbol{"a"}, Array{Constructor: codeSym8, Elems: []any{Symbol("a")}}},
		{"[]any", []any{uint8(1)}, List{uint8(1)}},
	} {
		b, err := Append(nil, tc.in)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got, _, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("%s: got %#v, %v; want %#v", tc.name, got, err, tc.want)
		}
	}
	if _, err := Append(nil, struct{}{}); err == nil {
		t.Fatal("Append(struct{}{}) should fail")
	}
	if _, err := Append(nil, Array{Elems: []any{"a", int64(1)}}); err == nil {
		t.Fatal("Append of a mixed array should fail")
	}
}

// malformedValues must fail to decode (and never panic).
var malformedValues = []struct {
	name string
	b    []byte
}{
	{"empty", nil},
	{"unknown constructor", []byte{0x01}},
	{"truncated uint", []byte{0x70, 0, 0}},
	{"truncated str8", []byte{0xa1, 5, 'a'}},
	{"str32 huge", []byte{0xb1, 0xff, 0xff, 0xff, 0xff, 'a'}},
	{"bad utf8", []byte{0xa1, 2, 0xff, 0xfe}},
	{"bad bool", []byte{0x56, 2}},
	{"list8 size 0", []byte{0xc0, 0, 0}},
	{"list8 count too big", []byte{0xc0, 2, 200, 0x40}},
	{"list8 size mismatch", []byte{0xc0, 3, 1, 0x40, 0x40}},
	{"list32 huge", []byte{0xd0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}},
	{"list32 small size", []byte{0xd0, 0, 0, 0, 2, 0, 0, 0, 0}},
	{"map odd", []byte{0xc1, 2, 1, 0x40}},
	{"array zero width huge", []byte{0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40}},
	{"array no constructor", []byte{0xe0, 1, 0}},
	{"array bad elem", []byte{0xe0, 3, 1, 0xa1, 5}},
	{"described descriptor missing", []byte{0x00}},
	{"described described", []byte{0x00, 0x00, 0x53, 1, 0x40, 0x40}},
	{"deep nesting", bytes.Repeat([]byte{0x00, 0x53, 0x01}, 40)},
}

func TestDecodeMalformed(t *testing.T) {
	for _, tc := range malformedValues {
		t.Run(tc.name, func(t *testing.T) {
			if v, _, err := Decode(tc.b); err == nil {
				t.Fatalf("Decode(% x) = %#v, want an error", tc.b, v)
			}
		})
	}
}

func u32(v uint32) *uint32 { return &v }
func u8(v uint8) *uint8    { return &v }
func u16(v uint16) *uint16 { return &v }

// performativeCases must survive AppendFrame → NextFrame → DecodeBody.
var performativeCases = []struct {
	name      string
	frameType uint8
	p         Performative
	payload   []byte
}{
	{"sasl-mechanisms", FrameSASL, &SASLMechanisms{Mechanisms: []Symbol{"ANONYMOUS", "PLAIN"}}, nil},
	{"sasl-init", FrameSASL, &SASLInit{Mechanism: "PLAIN", InitialResponse: []byte("\x00u\x00p"), Hostname: "h"}, nil},
	{"sasl-outcome", FrameSASL, &SASLOutcome{Code: SASLOK}, nil},
	{"open", FrameAMQP, &Open{ContainerID: "c", Hostname: "127.0.0.1:5672", MaxFrameSize: 65536, ChannelMax: 65535, IdleTimeout: 60000,
		Properties: Map{{Key: Symbol("product"), Value: "x"}}}, nil},
	{"open-channel-max", FrameAMQP, &Open{ContainerID: "c", MaxFrameSize: 512, ChannelMax: 9, OfferedCapabilities: []Symbol{"a"}}, nil},
	{"close", FrameAMQP, &Close{}, nil},
	{"close-error", FrameAMQP, &Close{Error: &Error{Condition: ErrFramingError, Description: "bad", Info: Map{{Key: Symbol("k"), Value: "v"}}}}, nil},
	{"begin", FrameAMQP, &Begin{NextOutgoingID: 1, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 4294967294}, nil},
	{"begin-reply", FrameAMQP, &Begin{RemoteChannel: u16(3), NextOutgoingID: 0, IncomingWindow: 5000, OutgoingWindow: 5000, HandleMax: 1<<32 - 1}, nil},
	{"end", FrameAMQP, &End{Error: &Error{Condition: ErrNotAllowed}}, nil},
	{"attach-receiver", FrameAMQP, &Attach{Name: "n", Handle: 2, Role: RoleReceiver, RcvSettleMode: u8(RcvFirst),
		Source: &Source{Address: "orders/ConsumerGroups/$Default/Partitions/0", Filter: Map{{Key: SelectorFilterKey,
			Value: Described{Descriptor: SelectorFilterCode, Value: "amqp.annotation.x-opt-offset > '-1'"}}}},
		Target:              &Target{Address: "inst"},
		DesiredCapabilities: []Symbol{"com.microsoft:georeplication"},
		Properties:          Map{{Key: Symbol("com.microsoft:epoch"), Value: int64(0)}}}, nil},
	{"attach-sender-reply", FrameAMQP, &Attach{Name: "n", Handle: 0, Role: RoleSender, SndSettleMode: u8(SndSettled),
		Source: &Source{Address: "$cbs"}, Target: &Target{Address: "$cbs-reply"}, InitialDeliveryCount: u32(0), MaxMessageSize: 1 << 20}, nil},
	{"detach", FrameAMQP, &Detach{Handle: 7, Closed: true, Error: &Error{Condition: ErrStolen, Description: "gone"}}, nil},
	{"flow-session", FrameAMQP, &Flow{NextIncomingID: u32(4), IncomingWindow: 5000, NextOutgoingID: 9, OutgoingWindow: 5000}, nil},
	{"flow-link", FrameAMQP, &Flow{NextIncomingID: u32(4), IncomingWindow: 5000, NextOutgoingID: 9, OutgoingWindow: 5000,
		Handle: u32(1), DeliveryCount: u32(10), LinkCredit: u32(300), Drain: true}, nil},
	{"transfer", FrameAMQP, &Transfer{Handle: 1, DeliveryID: u32(5), DeliveryTag: []byte{1, 2, 3, 4, 5, 6, 7, 8},
		MessageFormat: u32(BatchMessageFormat), More: true}, []byte{0x00, 0x53, 0x75, 0xa0, 1, 'x'}},
	{"transfer-settled", FrameAMQP, &Transfer{Handle: 1, DeliveryID: u32(0), DeliveryTag: []byte{0}, MessageFormat: u32(0), Settled: true}, []byte{0x00, 0x53, 0x77, 0x40}},
	{"disposition-accepted", FrameAMQP, &Disposition{Role: RoleReceiver, First: 3, Settled: true, State: &Accepted{}}, nil},
	{"disposition-rejected", FrameAMQP, &Disposition{Role: RoleReceiver, First: 3, Last: u32(4), Settled: true,
		State: &Rejected{Error: &Error{Condition: ErrServerBusy, Description: "busy"}}}, nil},
	{"disposition-released", FrameAMQP, &Disposition{Role: RoleSender, First: 1, State: &Released{}}, nil},
	{"disposition-modified", FrameAMQP, &Disposition{Role: RoleSender, First: 1, State: &Modified{DeliveryFailed: true}}, nil},
	{"disposition-received", FrameAMQP, &Disposition{Role: RoleSender, First: 1, State: &Received{SectionNumber: 1, SectionOffset: 2}}, nil},
}

func TestPerformativeRoundTrip(t *testing.T) {
	for _, tc := range performativeCases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AppendFrame(nil, tc.frameType, 3, tc.p, tc.payload)
			if err != nil {
				t.Fatalf("AppendFrame: %v", err)
			}
			f, n, err := NextFrame(b, 1<<20)
			if err != nil || n != len(b) {
				t.Fatalf("NextFrame = %d, %v; want %d", n, err, len(b))
			}
			if f.Header.Channel != 3 || f.Header.Type != tc.frameType {
				t.Fatalf("header = %+v", f.Header)
			}
			got, payload, err := DecodeBody(f.Header.Type, f.Body)
			if err != nil {
				t.Fatalf("DecodeBody: %v", err)
			}
			if !reflect.DeepEqual(got, tc.p) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, tc.p)
			}
			if !bytes.Equal(payload, tc.payload) {
				t.Fatalf("payload = % x, want % x", payload, tc.payload)
			}
		})
	}
}

// malformedBodies must fail DecodeBody.
var malformedBodies = []struct {
	name      string
	frameType uint8
	b         []byte
}{
	{"not described", FrameAMQP, []byte{0x45}},
	{"unknown descriptor", FrameAMQP, []byte{0x00, 0x53, 0x30, 0x45}},
	{"sasl descriptor in amqp frame", FrameAMQP, []byte{0x00, 0x53, 0x40, 0x45}},
	{"body not list", FrameAMQP, []byte{0x00, 0x53, 0x10, 0x40}},
	{"open without container-id", FrameAMQP, []byte{0x00, 0x53, 0x10, 0x45}},
	{"open container-id wrong type", FrameAMQP, []byte{0x00, 0x53, 0x10, 0xc0, 0x02, 0x01, 0x43}},
	{"begin missing windows", FrameAMQP, []byte{0x00, 0x53, 0x11, 0xc0, 0x03, 0x02, 0x40, 0x43}},
	{"attach missing role", FrameAMQP, []byte{0x00, 0x53, 0x12, 0xc0, 0x05, 0x02, 0xa1, 0x01, 'n', 0x43}},
	{"attach bad source", FrameAMQP, []byte{0x00, 0x53, 0x12, 0xc0, 0x08, 0x06, 0xa1, 0x01, 'n', 0x43, 0x41, 0x40, 0x40, 0x43}},
	{"flow missing fields", FrameAMQP, []byte{0x00, 0x53, 0x13, 0x45}},
	{"transfer handle wrong type", FrameAMQP, []byte{0x00, 0x53, 0x14, 0xc0, 0x02, 0x01, 0x41}},
	{"transfer bad state", FrameAMQP, []byte{0x00, 0x53, 0x14, 0xc0, 0x0b, 0x08, 0x43, 0x40, 0x40, 0x40, 0x40, 0x40, 0x40, 0x00, 0x53, 0x99, 0x45}},
	{"disposition missing first", FrameAMQP, []byte{0x00, 0x53, 0x15, 0xc0, 0x02, 0x01, 0x41}},
	{"detach error not composite", FrameAMQP, []byte{0x00, 0x53, 0x16, 0xc0, 0x04, 0x03, 0x43, 0x41, 0x43}},
	{"close error without condition", FrameAMQP, []byte{0x00, 0x53, 0x18, 0xc0, 0x05, 0x01, 0x00, 0x53, 0x1d, 0x45}},
	{"ulong too big for uint", FrameAMQP, []byte{0x00, 0x53, 0x16, 0xc0, 0x0a, 0x01, 0x80, 1, 0, 0, 0, 0, 0, 0, 0}},
	{"sasl-init no mechanism", FrameSASL, []byte{0x00, 0x53, 0x41, 0x45}},
}

func TestDecodeBodyMalformed(t *testing.T) {
	for _, tc := range malformedBodies {
		t.Run(tc.name, func(t *testing.T) {
			if p, _, err := DecodeBody(tc.frameType, tc.b); err == nil {
				t.Fatalf("DecodeBody(% x) = %#v, want an error", tc.b, p)
			}
		})
	}
}

func TestFrameHeaderMalformed(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"size below 8", []byte{0, 0, 0, 4, 2, 0, 0, 0}},
		{"size above max", []byte{0, 1, 0, 1, 2, 0, 0, 0}},
		{"doff below 2", []byte{0, 0, 0, 8, 1, 0, 0, 0}},
		{"doff past size", []byte{0, 0, 0, 8, 3, 0, 0, 0}},
		{"unknown type", []byte{0, 0, 0, 8, 2, 7, 0, 0}},
	} {
		if _, _, err := NextFrame(tc.b, 65536); err == nil {
			t.Errorf("%s: NextFrame(% x) succeeded", tc.name, tc.b)
		}
	}
	if _, err := ParseProtocolHeader([]byte("HTTP/1.1")); err == nil {
		t.Error("ParseProtocolHeader(HTTP) succeeded")
	}
	if id, err := ParseProtocolHeader(ProtocolHeader(ProtoSASL)); err != nil || id != ProtoSASL {
		t.Errorf("ParseProtocolHeader(SASL) = %d, %v", id, err)
	}
}

// TestSplitAtEveryCut feeds a stream of every valid frame split at every
// byte boundary into a reassembling reader and expects the same frames.
func TestSplitAtEveryCut(t *testing.T) {
	var stream []byte
	stream = AppendEmptyFrame(stream)
	for _, tc := range performativeCases {
		var err error
		if stream, err = AppendFrame(stream, tc.frameType, 1, tc.p, tc.payload); err != nil {
			t.Fatal(err)
		}
	}
	want := splitAll(t, [][]byte{stream})
	if len(want) != len(performativeCases)+1 {
		t.Fatalf("got %d frames, want %d", len(want), len(performativeCases)+1)
	}
	for cut := 0; cut <= len(stream); cut++ {
		got := splitAll(t, [][]byte{stream[:cut], stream[cut:]})
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cut at %d: frames differ", cut)
		}
	}
}

// splitAll reassembles frames from chunks the way a connection reader does.
func splitAll(t *testing.T, chunks [][]byte) []string {
	t.Helper()
	var buf []byte
	var out []string
	for _, c := range chunks {
		buf = append(buf, c...)
		for {
			f, n, err := NextFrame(buf, 1<<20)
			if err != nil {
				t.Fatalf("NextFrame: %v", err)
			}
			if n == 0 {
				break
			}
			if len(f.Body) > 0 {
				p, payload, err := DecodeBody(f.Header.Type, f.Body)
				if err != nil {
					t.Fatalf("DecodeBody: %v", err)
				}
				out = append(out, reflect.TypeOf(p).String()+string(payload))
			} else {
				out = append(out, "heartbeat")
			}
			buf = buf[n:]
		}
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left over", len(buf))
	}
	return out
}

func TestSelector(t *testing.T) {
	s := &Source{Filter: Map{{Key: SelectorFilterKey, Value: Described{Descriptor: SelectorFilterCode, Value: "e"}}}}
	if e, ok := s.Selector(); !ok || e != "e" {
		t.Fatalf("Selector = %q, %v", e, ok)
	}
	if _, ok := (&Source{}).Selector(); ok {
		t.Fatal("Selector on an empty source reported a filter")
	}
}

func TestBatchAndAnnotations(t *testing.T) {
	inner := &goamqp.Message{
		Data:        [][]byte{[]byte("hello")},
		Annotations: goamqp.Annotations{"messageAnnotation1": int64(101)},
		Properties:  &goamqp.MessageProperties{MessageID: "id-1"},
		Header:      &goamqp.MessageHeader{Durable: true},
	}
	innerBytes, err := inner.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	env := &goamqp.Message{Data: [][]byte{innerBytes, innerBytes}, Annotations: goamqp.Annotations{"x-opt-partition-key": "k"}}
	envBytes, err := env.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := BatchPayloads(envBytes)
	if err != nil || len(payloads) != 2 || !bytes.Equal(payloads[0], innerBytes) {
		t.Fatalf("BatchPayloads = %d payloads, %v", len(payloads), err)
	}
	add := Map{{Key: Symbol("x-opt-sequence-number"), Value: int64(7)}, {Key: Symbol("x-opt-offset"), Value: "700"}}
	for _, tc := range []struct {
		name string
		msg  []byte
		keep map[string]any
	}{
		{"with annotations", innerBytes, map[string]any{"messageAnnotation1": int64(101)}},
		{"without annotations", mustMarshal(t, &goamqp.Message{Value: "v", Header: &goamqp.MessageHeader{Priority: 4}}), nil},
		{"body only", mustMarshal(t, &goamqp.Message{Data: [][]byte{{1}}}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AppendWithAnnotations(nil, tc.msg, add)
			if err != nil {
				t.Fatal(err)
			}
			var m goamqp.Message
			if err := m.UnmarshalBinary(out); err != nil {
				t.Fatalf("go-amqp cannot read the merged message: %v", err)
			}
			if m.Annotations["x-opt-sequence-number"] != int64(7) || m.Annotations["x-opt-offset"] != "700" {
				t.Fatalf("annotations = %v", m.Annotations)
			}
			for k, v := range tc.keep {
				if m.Annotations[k] != v {
					t.Fatalf("user annotation %s = %v, want %v", k, m.Annotations[k], v)
				}
			}
		})
	}
	if _, err := AppendWithAnnotations(nil, []byte{0x40}, add); err == nil {
		t.Fatal("AppendWithAnnotations accepted a non-section")
	}
}

func mustMarshal(t *testing.T, m *goamqp.Message) []byte {
	t.Helper()
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeErrorType(t *testing.T) {
	_, _, err := Decode([]byte{0x70})
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %T is not a *DecodeError", err)
	}
}
