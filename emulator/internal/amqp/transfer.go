package amqp

// DescTransfer is the descriptor code of the transfer performative.
const DescTransfer uint64 = 0x14

// BatchMessageFormat is the message-format of an Event Hubs batch: one
// envelope whose data sections each hold one complete encoded message.
const BatchMessageFormat uint32 = 0x80013700

// Transfer carries (a frame of) a message on a link (part 2.7.5). The
// message bytes follow the performative in the frame body; they are not
// part of this struct.
type Transfer struct {
	Handle        uint32 // mandatory
	DeliveryID    *uint32
	DeliveryTag   []byte
	MessageFormat *uint32
	Settled       bool
	More          bool
	RcvSettleMode *uint8
	State         DeliveryState
	Resume        bool
	Aborted       bool
	Batchable     bool
}

// Descriptor returns the performative's descriptor code.
func (*Transfer) Descriptor() uint64 { return DescTransfer }

// AppendAMQP encodes the performative (without the payload).
func (t *Transfer) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescTransfer)
	w.uint(t.Handle)
	w.optUint(t.DeliveryID)
	w.binary(t.DeliveryTag)
	w.optUint(t.MessageFormat)
	w.boolOmitFalse(t.Settled)
	w.boolOmitFalse(t.More)
	w.optUbyte(t.RcvSettleMode)
	w.marshaler(t.State, t.State == nil)
	w.boolOmitFalse(t.Resume)
	w.boolOmitFalse(t.Aborted)
	w.boolOmitFalse(t.Batchable)
	return w.done()
}

func (t *Transfer) decodeFields(f *fields) error {
	f.mandatory(0)
	*t = Transfer{
		Handle:        f.uint(0, 0),
		DeliveryID:    f.optUint(1),
		DeliveryTag:   f.binary(2),
		MessageFormat: f.optUint(3),
		Settled:       f.bool(4),
		More:          f.bool(5),
		RcvSettleMode: f.optUbyte(6),
		Resume:        f.bool(8),
		Aborted:       f.bool(9),
		Batchable:     f.bool(10),
	}
	var err error
	if t.State, err = deliveryStateFromValue(f.get(7)); err != nil && f.err == nil {
		f.err = err
	}
	return f.err
}

// Decode decodes a transfer performative from the start of b; the payload
// is whatever DecodeBody reports after it.
func (t *Transfer) Decode(b []byte) error { return decodeInto(b, t) }
