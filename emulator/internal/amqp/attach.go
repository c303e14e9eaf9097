package amqp

// Descriptor codes of the link performatives.
const (
	DescAttach uint64 = 0x12
	DescDetach uint64 = 0x16
)

// Link roles (part 2.8.1).
const (
	RoleSender   = false
	RoleReceiver = true
)

// Settlement modes (part 2.8.2, 2.8.3).
const (
	SndUnsettled uint8 = 0
	SndSettled   uint8 = 1
	SndMixed     uint8 = 2
	RcvFirst     uint8 = 0
	RcvSecond    uint8 = 1
)

// Attach attaches a link to a session (part 2.7.3). Nil pointer fields were
// absent on the wire; the emulator echoes requested settle modes exactly.
type Attach struct {
	Name                 string // mandatory
	Handle               uint32 // mandatory
	Role                 bool   // mandatory; RoleSender or RoleReceiver
	SndSettleMode        *uint8
	RcvSettleMode        *uint8
	Source               *Source
	Target               *Target
	Unsettled            Map
	IncompleteUnsettled  bool
	InitialDeliveryCount *uint32
	MaxMessageSize       uint64 // 0 = no limit
	OfferedCapabilities  []Symbol
	DesiredCapabilities  []Symbol
	Properties           Map
}

// Descriptor returns the performative's descriptor code.
func (*Attach) Descriptor() uint64 { return DescAttach }

// AppendAMQP encodes the performative.
func (a *Attach) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescAttach)
	w.str(a.Name)
	w.uint(a.Handle)
	w.bool(a.Role)
	w.optUbyte(a.SndSettleMode)
	w.optUbyte(a.RcvSettleMode)
	w.marshaler(a.Source, a.Source == nil)
	w.marshaler(a.Target, a.Target == nil)
	w.fieldMap(a.Unsettled)
	w.boolOmitFalse(a.IncompleteUnsettled)
	w.optUint(a.InitialDeliveryCount)
	w.ulongOmitZero(a.MaxMessageSize)
	w.symbols(a.OfferedCapabilities)
	w.symbols(a.DesiredCapabilities)
	w.fieldMap(a.Properties)
	return w.done()
}

func (a *Attach) decodeFields(f *fields) error {
	f.mandatory(0)
	f.mandatory(1)
	f.mandatory(2)
	*a = Attach{
		Name:                 f.str(0),
		Handle:               f.uint(1, 0),
		Role:                 f.bool(2),
		SndSettleMode:        f.optUbyte(3),
		RcvSettleMode:        f.optUbyte(4),
		Unsettled:            f.fieldMap(7),
		IncompleteUnsettled:  f.bool(8),
		InitialDeliveryCount: f.optUint(9),
		MaxMessageSize:       f.ulong(10),
		OfferedCapabilities:  f.symbols(11),
		DesiredCapabilities:  f.symbols(12),
		Properties:           f.fieldMap(13),
	}
	var err error
	if a.Source, err = sourceFromValue(f.get(5)); err != nil && f.err == nil {
		f.err = err
	}
	if a.Target, err = targetFromValue(f.get(6)); err != nil && f.err == nil {
		f.err = err
	}
	return f.err
}

// Decode decodes an attach performative from b.
func (a *Attach) Decode(b []byte) error { return decodeInto(b, a) }

// Detach detaches a link (part 2.7.7). The Event Hubs client requires
// Closed to be true on every detach it receives.
type Detach struct {
	Handle uint32 // mandatory
	Closed bool
	Error  *Error
}

// Descriptor returns the performative's descriptor code.
func (*Detach) Descriptor() uint64 { return DescDetach }

// AppendAMQP encodes the performative.
func (d *Detach) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescDetach)
	w.uint(d.Handle)
	w.boolOmitFalse(d.Closed)
	w.marshaler(d.Error, d.Error == nil)
	return w.done()
}

func (d *Detach) decodeFields(f *fields) error {
	f.mandatory(0)
	*d = Detach{Handle: f.uint(0, 0), Closed: f.bool(1), Error: f.errorField(2)}
	return f.err
}

// Decode decodes a detach performative from b.
func (d *Detach) Decode(b []byte) error { return decodeInto(b, d) }
