package amqp

// Descriptor codes of the connection performatives.
const (
	DescOpen  uint64 = 0x10
	DescClose uint64 = 0x18
)

// Open negotiates connection parameters (part 2.7.1).
type Open struct {
	ContainerID         string // mandatory
	Hostname            string
	MaxFrameSize        uint32 // 0 on decode means the default, 4294967295
	ChannelMax          uint16 // decoded default 65535
	IdleTimeout         uint32 // milliseconds; 0 = none
	OfferedCapabilities []Symbol
	DesiredCapabilities []Symbol
	Properties          Map
}

// Descriptor returns the performative's descriptor code.
func (*Open) Descriptor() uint64 { return DescOpen }

// AppendAMQP encodes the performative.
func (o *Open) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescOpen)
	w.str(o.ContainerID)
	w.strOmitEmpty(o.Hostname)
	w.uintDef(o.MaxFrameSize, 0)
	w.any(o.ChannelMax) // always sent: pyamqp reads it without a default
	w.uintDef(o.IdleTimeout, 0)
	w.null() // outgoing-locales
	w.null() // incoming-locales
	w.symbols(o.OfferedCapabilities)
	w.symbols(o.DesiredCapabilities)
	w.fieldMap(o.Properties)
	return w.done()
}

func (o *Open) decodeFields(f *fields) error {
	f.mandatory(0)
	*o = Open{
		ContainerID:         f.str(0),
		Hostname:            f.str(1),
		MaxFrameSize:        f.uint(2, 1<<32-1),
		ChannelMax:          uint16(f.uint(3, 65535)),
		IdleTimeout:         f.uint(4, 0),
		OfferedCapabilities: f.symbols(7),
		DesiredCapabilities: f.symbols(8),
		Properties:          f.fieldMap(9),
	}
	if v, ok := f.get(3).(uint16); !ok && f.get(3) != nil {
		f.bad(3, "ushort")
	} else if ok {
		o.ChannelMax = v
	}
	return f.err
}

// Decode decodes an open performative from b.
func (o *Open) Decode(b []byte) error { return decodeInto(b, o) }

// Close closes the connection, optionally with an error (part 2.7.9).
type Close struct {
	Error *Error
}

// Descriptor returns the performative's descriptor code.
func (*Close) Descriptor() uint64 { return DescClose }

// AppendAMQP encodes the performative.
func (c *Close) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescClose)
	w.marshaler(c.Error, c.Error == nil)
	return w.done()
}

func (c *Close) decodeFields(f *fields) error {
	c.Error = f.errorField(0)
	return f.err
}

// Decode decodes a close performative from b.
func (c *Close) Decode(b []byte) error { return decodeInto(b, c) }
