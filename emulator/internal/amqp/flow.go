package amqp

// DescFlow is the descriptor code of the flow performative.
const DescFlow uint64 = 0x13

// Flow updates session and, when Handle is set, link flow state
// (part 2.7.4). The Event Hubs client requires NextIncomingID on every flow
// the server sends, and LinkCredit on every link flow.
type Flow struct {
	NextIncomingID *uint32
	IncomingWindow uint32 // mandatory
	NextOutgoingID uint32 // mandatory
	OutgoingWindow uint32 // mandatory
	Handle         *uint32
	DeliveryCount  *uint32
	LinkCredit     *uint32
	Available      *uint32
	Drain          bool
	Echo           bool
	Properties     Map
}

// Descriptor returns the performative's descriptor code.
func (*Flow) Descriptor() uint64 { return DescFlow }

// AppendAMQP encodes the performative.
func (fl *Flow) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescFlow)
	w.optUint(fl.NextIncomingID)
	w.uint(fl.IncomingWindow)
	w.uint(fl.NextOutgoingID)
	w.uint(fl.OutgoingWindow)
	w.optUint(fl.Handle)
	w.optUint(fl.DeliveryCount)
	w.optUint(fl.LinkCredit)
	w.optUint(fl.Available)
	w.boolOmitFalse(fl.Drain)
	w.boolOmitFalse(fl.Echo)
	w.fieldMap(fl.Properties)
	return w.done()
}

func (fl *Flow) decodeFields(f *fields) error {
	f.mandatory(1)
	f.mandatory(2)
	f.mandatory(3)
	*fl = Flow{
		NextIncomingID: f.optUint(0),
		IncomingWindow: f.uint(1, 0),
		NextOutgoingID: f.uint(2, 0),
		OutgoingWindow: f.uint(3, 0),
		Handle:         f.optUint(4),
		DeliveryCount:  f.optUint(5),
		LinkCredit:     f.optUint(6),
		Available:      f.optUint(7),
		Drain:          f.bool(8),
		Echo:           f.bool(9),
		Properties:     f.fieldMap(10),
	}
	return f.err
}

// Decode decodes a flow performative from b.
func (fl *Flow) Decode(b []byte) error { return decodeInto(b, fl) }
