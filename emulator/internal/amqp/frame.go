package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame types (part 2.3).
const (
	FrameAMQP uint8 = 0x00
	FrameSASL uint8 = 0x01
)

// Protocol IDs of the 8-byte protocol headers ("AMQP" id 1 0 0).
const (
	ProtoAMQP uint8 = 0
	ProtoTLS  uint8 = 2
	ProtoSASL uint8 = 3
)

// HeaderSize is the size of the fixed frame header and of a protocol header.
const HeaderSize = 8

// MinMaxFrameSize is the smallest max-frame-size a peer may announce.
const MinMaxFrameSize = 512

// emptyFrame is the heartbeat frame: a header and no body.
const emptyFrame = "\x00\x00\x00\x08\x02\x00\x00\x00"

// AppendEmptyFrame appends the heartbeat frame (a header and no body) to dst.
func AppendEmptyFrame(dst []byte) []byte { return append(dst, emptyFrame...) }

// ProtocolHeader returns the 8-byte protocol header for id.
func ProtocolHeader(id uint8) []byte { return []byte{'A', 'M', 'Q', 'P', id, 1, 0, 0} }

// ParseProtocolHeader checks an 8-byte protocol header and returns its id.
func ParseProtocolHeader(b []byte) (uint8, error) {
	if len(b) < HeaderSize {
		return 0, &DecodeError{What: "protocol header", Reason: "truncated"}
	}
	if string(b[:4]) != "AMQP" || b[5] != 1 || b[6] != 0 || b[7] != 0 {
		return 0, &DecodeError{What: "protocol header", Reason: fmt.Sprintf("unsupported header % x", b[:8])}
	}
	return b[4], nil
}

// FrameHeader is the fixed 8-byte header of every frame.
type FrameHeader struct {
	Size    uint32 // total frame size, header included
	DataOff uint8  // body offset in 4-byte words, at least 2
	Type    uint8
	Channel uint16
}

// ParseFrameHeader validates and returns the header at the start of b.
// maxSize is the largest frame the receiver accepts.
func ParseFrameHeader(b []byte, maxSize uint32) (FrameHeader, error) {
	if len(b) < HeaderSize {
		return FrameHeader{}, &DecodeError{What: "frame header", Reason: "truncated"}
	}
	h := FrameHeader{
		Size:    binary.BigEndian.Uint32(b),
		DataOff: b[4],
		Type:    b[5],
		Channel: binary.BigEndian.Uint16(b[6:]),
	}
	switch {
	case h.Size < HeaderSize:
		return h, &DecodeError{What: "frame header", Reason: fmt.Sprintf("size %d below 8", h.Size)}
	case h.Size > maxSize:
		return h, &DecodeError{What: "frame header", Reason: fmt.Sprintf("size %d above max-frame-size %d", h.Size, maxSize)}
	case h.DataOff < 2 || uint32(h.DataOff)*4 > h.Size:
		return h, &DecodeError{What: "frame header", Reason: fmt.Sprintf("data offset %d out of range", h.DataOff)}
	case h.Type != FrameAMQP && h.Type != FrameSASL:
		return h, &DecodeError{What: "frame header", Reason: fmt.Sprintf("unknown frame type %d", h.Type)}
	}
	return h, nil
}

// Frame is one complete frame: its header and its body (extended header
// skipped). An empty Body is a heartbeat.
type Frame struct {
	Header FrameHeader
	Body   []byte
}

// NextFrame splits the first complete frame off buf. It returns n == 0 and
// no error when buf holds only part of a frame. Body aliases buf.
func NextFrame(buf []byte, maxSize uint32) (f Frame, n int, err error) {
	if len(buf) < HeaderSize {
		return Frame{}, 0, nil
	}
	h, err := ParseFrameHeader(buf, maxSize)
	if err != nil {
		return Frame{}, 0, err
	}
	if uint32(len(buf)) < h.Size {
		return Frame{}, 0, nil
	}
	return Frame{Header: h, Body: buf[int(h.DataOff)*4 : h.Size]}, int(h.Size), nil
}

// Performative is a frame body: one of the AMQP performatives or SASL
// frames defined in this package.
type Performative interface {
	Marshaler
	Descriptor() uint64
	Decode(b []byte) error
	decodeFields(f *fields) error
}

func decodeInto(b []byte, p Performative) error {
	f, _, err := decodeComposite(b, fmt.Sprintf("performative %#x", p.Descriptor()), p.Descriptor())
	if err != nil {
		return err
	}
	return p.decodeFields(f)
}

// ErrUnknownPerformative is wrapped by DecodeBody for descriptors it does
// not know.
var ErrUnknownPerformative = errors.New("amqp: unknown performative")

// DecodeBody decodes the performative at the start of a frame body and
// returns it with the remaining bytes (the transfer payload).
func DecodeBody(frameType uint8, body []byte) (Performative, []byte, error) {
	v, n, err := Decode(body)
	if err != nil {
		return nil, nil, fmt.Errorf("frame body: %w", err)
	}
	d, ok := v.(Described)
	if !ok {
		return nil, nil, &DecodeError{What: "frame body", Reason: fmt.Sprintf("expected a described performative, got %T", v)}
	}
	code, _ := d.Descriptor.(uint64)
	var p Performative
	if frameType == FrameSASL {
		switch code {
		case DescSASLMechanisms:
			p = &SASLMechanisms{}
		case DescSASLInit:
			p = &SASLInit{}
		case DescSASLOutcome:
			p = &SASLOutcome{}
		}
	} else {
		switch code {
		case DescOpen:
			p = &Open{}
		case DescBegin:
			p = &Begin{}
		case DescAttach:
			p = &Attach{}
		case DescFlow:
			p = &Flow{}
		case DescTransfer:
			p = &Transfer{}
		case DescDisposition:
			p = &Disposition{}
		case DescDetach:
			p = &Detach{}
		case DescEnd:
			p = &End{}
		case DescClose:
			p = &Close{}
		}
	}
	if p == nil {
		return nil, nil, fmt.Errorf("%w: descriptor %v in frame type %d", ErrUnknownPerformative, d.Descriptor, frameType)
	}
	f, err := compositeFields(v, fmt.Sprintf("performative %#x", code), code)
	if err != nil {
		return nil, nil, err
	}
	if err := p.decodeFields(f); err != nil {
		return nil, nil, err
	}
	return p, body[n:], nil
}

// AppendFrame appends a complete frame holding p followed by payload.
func AppendFrame(dst []byte, frameType uint8, channel uint16, p Performative, payload []byte) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 2, frameType, byte(channel>>8), byte(channel))
	dst, err := p.AppendAMQP(dst)
	if err != nil {
		return dst[:start], err
	}
	dst = append(dst, payload...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start))
	return dst, nil
}
