package amqp

import "fmt"

// Descriptor codes of the error and delivery-state composites (part 3.4, 2.8.14).
const (
	DescError    uint64 = 0x1d
	DescReceived uint64 = 0x23
	DescAccepted uint64 = 0x24
	DescRejected uint64 = 0x25
	DescReleased uint64 = 0x26
	DescModified uint64 = 0x27
)

// Error conditions used by the emulator (AMQP part 2.8.15–2.8.18 and the
// Event Hubs vendor conditions the azeventhubs SDK classifies).
const (
	ErrInternal            Symbol = "amqp:internal-error"
	ErrNotFound            Symbol = "amqp:not-found"
	ErrUnauthorized        Symbol = "amqp:unauthorized-access"
	ErrDecode              Symbol = "amqp:decode-error"
	ErrResourceLimit       Symbol = "amqp:resource-limit-exceeded"
	ErrNotAllowed          Symbol = "amqp:not-allowed"
	ErrInvalidField        Symbol = "amqp:invalid-field"
	ErrNotImplemented      Symbol = "amqp:not-implemented"
	ErrFramingError        Symbol = "amqp:connection:framing-error"
	ErrConnectionForced    Symbol = "amqp:connection:forced"
	ErrUnattachedHandle    Symbol = "amqp:session:unattached-handle"
	ErrWindowViolation     Symbol = "amqp:session:window-violation"
	ErrHandleInUse         Symbol = "amqp:session:handle-in-use"
	ErrDetachForced        Symbol = "amqp:link:detach-forced"
	ErrTransferLimit       Symbol = "amqp:link:transfer-limit-exceeded"
	ErrMessageSizeExceeded Symbol = "amqp:link:message-size-exceeded"
	ErrStolen              Symbol = "amqp:link:stolen"
	ErrServerBusy          Symbol = "com.microsoft:server-busy"
	ErrArgumentOutOfRange  Symbol = "com.microsoft:argument-out-of-range"
)

// Error is the AMQP error composite carried by close, end, detach and the
// rejected outcome. It implements the error interface.
type Error struct {
	Condition   Symbol
	Description string
	Info        Map
}

func (e *Error) Error() string {
	if e.Description == "" {
		return string(e.Condition)
	}
	return fmt.Sprintf("%s: %s", e.Condition, e.Description)
}

// AppendAMQP encodes the error composite.
func (e *Error) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescError)
	w.dst = AppendSymbol(w.dst, e.Condition) // mandatory, even when empty
	w.count++
	w.strOmitEmpty(e.Description)
	w.fieldMap(e.Info)
	return w.done()
}

func errorFromValue(v any) (*Error, error) {
	f, err := compositeFields(v, "error", DescError)
	if err != nil {
		return nil, err
	}
	f.mandatory(0)
	e := &Error{Condition: f.sym(0), Description: f.str(1), Info: f.fieldMap(2)}
	return e, f.err
}

// DeliveryState is an outcome or the received state of a delivery:
// *Accepted, *Rejected, *Released, *Modified or *Received.
type DeliveryState interface {
	Marshaler
	deliveryState()
}

// Accepted is the accepted outcome.
type Accepted struct{}

// Rejected is the rejected outcome with an optional error.
type Rejected struct{ Error *Error }

// Released is the released outcome.
type Released struct{}

// Modified is the modified outcome.
type Modified struct {
	DeliveryFailed     bool
	UndeliverableHere  bool
	MessageAnnotations Map
}

// Received is the received delivery state of a partially transferred message.
type Received struct {
	SectionNumber uint32
	SectionOffset uint64
}

func (*Accepted) deliveryState() {}
func (*Rejected) deliveryState() {}
func (*Released) deliveryState() {}
func (*Modified) deliveryState() {}
func (*Received) deliveryState() {}

// AppendAMQP encodes the outcome.
func (*Accepted) AppendAMQP(dst []byte) ([]byte, error) {
	return newFieldWriter(dst, DescAccepted).done()
}

// AppendAMQP encodes the outcome.
func (r *Rejected) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescRejected)
	w.marshaler(r.Error, r.Error == nil)
	return w.done()
}

// AppendAMQP encodes the outcome.
func (*Released) AppendAMQP(dst []byte) ([]byte, error) {
	return newFieldWriter(dst, DescReleased).done()
}

// AppendAMQP encodes the outcome.
func (m *Modified) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescModified)
	w.boolOmitFalse(m.DeliveryFailed)
	w.boolOmitFalse(m.UndeliverableHere)
	w.fieldMap(m.MessageAnnotations)
	return w.done()
}

// AppendAMQP encodes the state.
func (r *Received) AppendAMQP(dst []byte) ([]byte, error) {
	w := newFieldWriter(dst, DescReceived)
	w.uint(r.SectionNumber)
	w.dst = AppendUlong(w.dst, r.SectionOffset)
	w.count++
	return w.done()
}

// deliveryStateFromValue converts a decoded described value to a state.
func deliveryStateFromValue(v any) (DeliveryState, error) {
	if v == nil {
		return nil, nil
	}
	d, ok := v.(Described)
	if !ok {
		return nil, &DecodeError{What: "delivery-state", Reason: fmt.Sprintf("got %T", v)}
	}
	code, _ := d.Descriptor.(uint64)
	switch code {
	case DescAccepted:
		_, err := compositeFields(v, "accepted", code)
		return &Accepted{}, err
	case DescRejected:
		f, err := compositeFields(v, "rejected", code)
		if err != nil {
			return nil, err
		}
		r := &Rejected{Error: f.errorField(0)}
		return r, f.err
	case DescReleased:
		_, err := compositeFields(v, "released", code)
		return &Released{}, err
	case DescModified:
		f, err := compositeFields(v, "modified", code)
		if err != nil {
			return nil, err
		}
		m := &Modified{DeliveryFailed: f.bool(0), UndeliverableHere: f.bool(1), MessageAnnotations: f.fieldMap(2)}
		return m, f.err
	case DescReceived:
		f, err := compositeFields(v, "received", code)
		if err != nil {
			return nil, err
		}
		f.mandatory(0)
		f.mandatory(1)
		r := &Received{SectionNumber: f.uint(0, 0), SectionOffset: f.ulong(1)}
		return r, f.err
	}
	return nil, &DecodeError{What: "delivery-state", Reason: fmt.Sprintf("unknown descriptor %v", d.Descriptor)}
}
