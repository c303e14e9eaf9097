package amqp

// DescDisposition is the descriptor code of the disposition performative.
const DescDisposition uint64 = 0x15

// Disposition settles or updates the state of a range of deliveries
// (part 2.7.6).
type Disposition struct {
	Role      bool   // mandatory
	First     uint32 // mandatory
	Last      *uint32
	Settled   bool
	State     DeliveryState
	Batchable bool
}

// Descriptor returns the performative's descriptor code.
func (*Disposition) Descriptor() uint64 { return DescDisposition }

// AppendAMQP encodes the performative.
func (d *Disposition) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescDisposition)
	w.bool(d.Role)
	w.uint(d.First)
	w.optUint(d.Last)
	w.boolOmitFalse(d.Settled)
	w.marshaler(d.State, d.State == nil)
	w.boolOmitFalse(d.Batchable)
	return w.done()
}

func (d *Disposition) decodeFields(f *fields) error {
	f.mandatory(0)
	f.mandatory(1)
	*d = Disposition{
		Role:      f.bool(0),
		First:     f.uint(1, 0),
		Last:      f.optUint(2),
		Settled:   f.bool(3),
		Batchable: f.bool(5),
	}
	var err error
	if d.State, err = deliveryStateFromValue(f.get(4)); err != nil && f.err == nil {
		f.err = err
	}
	return f.err
}

// Decode decodes a disposition performative from b.
func (d *Disposition) Decode(b []byte) error { return decodeInto(b, d) }
