package amqp

// Descriptor codes of the session performatives.
const (
	DescBegin uint64 = 0x11
	DescEnd   uint64 = 0x17
)

// Begin starts a session on a channel (part 2.7.2).
type Begin struct {
	RemoteChannel       *uint16 // set only in the reply to a peer's begin
	NextOutgoingID      uint32  // mandatory
	IncomingWindow      uint32  // mandatory
	OutgoingWindow      uint32  // mandatory
	HandleMax           uint32  // decoded default 4294967295
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Descriptor returns the performative's descriptor code.
func (*Begin) Descriptor() uint64 { return DescBegin }

// AppendAMQP encodes the performative.
func (b *Begin) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescBegin)
	if b.RemoteChannel == nil {
		w.null()
	} else {
		w.any(*b.RemoteChannel)
	}
	w.uint(b.NextOutgoingID)
	w.uint(b.IncomingWindow)
	w.uint(b.OutgoingWindow)
	w.uint(b.HandleMax) // always sent: pyamqp compares against it without a default
	w.symbols(b.OfferedCapabilities)
	w.symbols(b.DesiredCapabilities)
	w.fieldMap(b.Properties)
	return w.done()
}

func (b *Begin) decodeFields(f *fields) error {
	f.mandatory(1)
	f.mandatory(2)
	f.mandatory(3)
	*b = Begin{
		NextOutgoingID:      f.uint(1, 0),
		IncomingWindow:      f.uint(2, 0),
		OutgoingWindow:      f.uint(3, 0),
		HandleMax:           f.uint(4, 1<<32-1),
		OfferedCapabilities: f.symbols(5),
		DesiredCapabilities: f.symbols(6),
		Properties:          f.fieldMap(7),
	}
	switch v := f.get(0).(type) {
	case nil:
	case uint16:
		b.RemoteChannel = &v
	default:
		f.bad(0, "ushort")
	}
	return f.err
}

// Decode decodes a begin performative from b.
func (b *Begin) Decode(p []byte) error { return decodeInto(p, b) }

// End ends a session, optionally with an error (part 2.7.8).
type End struct {
	Error *Error
}

// Descriptor returns the performative's descriptor code.
func (*End) Descriptor() uint64 { return DescEnd }

// AppendAMQP encodes the performative.
func (e *End) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescEnd)
	w.marshaler(e.Error, e.Error == nil)
	return w.done()
}

func (e *End) decodeFields(f *fields) error {
	e.Error = f.errorField(0)
	return f.err
}

// Decode decodes an end performative from b.
func (e *End) Decode(b []byte) error { return decodeInto(b, e) }
