package hub

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PositionKind says which field of a [StartPosition] applies.
type PositionKind int

const (
	// PositionLatest (the zero value) delivers only events appended after the
	// receiver opened ('@latest'), as the SDK's default start position does.
	PositionLatest PositionKind = iota
	// PositionEarliest delivers from the first retained event ('-1').
	PositionEarliest
	// PositionOffset starts at StartPosition.Offset.
	PositionOffset
	// PositionSequenceNumber starts at StartPosition.SequenceNumber.
	PositionSequenceNumber
	// PositionEnqueuedTime starts at StartPosition.EnqueuedTime.
	PositionEnqueuedTime
)

// String returns the kind's name.
func (k PositionKind) String() string {
	switch k {
	case PositionLatest:
		return "latest"
	case PositionEarliest:
		return "earliest"
	case PositionOffset:
		return "offset"
	case PositionSequenceNumber:
		return "sequence-number"
	case PositionEnqueuedTime:
		return "enqueued-time"
	}
	return fmt.Sprintf("PositionKind(%d)", int(k))
}

// StartPosition is where a receiver starts reading. The zero value is
// PositionLatest. A position beyond the last event is not an error: the
// receiver then delivers the events appended after it opened. A position
// before the first retained event starts at the first retained event.
type StartPosition struct {
	// Kind selects which of the fields below applies.
	Kind PositionKind
	// Inclusive delivers the event at the position itself ('>='); otherwise
	// delivery starts after it ('>'). Ignored for latest and earliest.
	Inclusive bool
	// Offset applies to PositionOffset. Offsets compare numerically; when no
	// event has exactly this offset, delivery starts at the next larger one.
	Offset int64
	// SequenceNumber applies to PositionSequenceNumber; it may be -1.
	SequenceNumber int64
	// EnqueuedTime applies to PositionEnqueuedTime, at millisecond precision
	// (enqueued times are stored truncated to milliseconds).
	EnqueuedTime time.Time
}

// Earliest returns the position of the first retained event.
func Earliest() StartPosition { return StartPosition{Kind: PositionEarliest} }

// Latest returns the position after the last event at the time the receiver opens.
func Latest() StartPosition { return StartPosition{Kind: PositionLatest} }

// AtSequenceNumber returns a position at (inclusive) or after sequence number n.
func AtSequenceNumber(n int64, inclusive bool) StartPosition {
	return StartPosition{Kind: PositionSequenceNumber, SequenceNumber: n, Inclusive: inclusive}
}

// AtOffset returns a position at (inclusive) or after offset off.
func AtOffset(off int64, inclusive bool) StartPosition {
	return StartPosition{Kind: PositionOffset, Offset: off, Inclusive: inclusive}
}

// AtEnqueuedTime returns a position at (inclusive) or after enqueued time t.
func AtEnqueuedTime(t time.Time, inclusive bool) StartPosition {
	return StartPosition{Kind: PositionEnqueuedTime, EnqueuedTime: t, Inclusive: inclusive}
}

// String returns the position as the selector expression ParseSelector accepts.
func (sp StartPosition) String() string {
	op := ">"
	if sp.Inclusive {
		op = ">="
	}
	switch sp.Kind {
	case PositionEarliest:
		return "amqp.annotation.x-opt-offset > '-1'"
	case PositionOffset:
		return fmt.Sprintf("amqp.annotation.x-opt-offset %s '%d'", op, sp.Offset)
	case PositionSequenceNumber:
		return fmt.Sprintf("amqp.annotation.x-opt-sequence-number %s '%d'", op, sp.SequenceNumber)
	case PositionEnqueuedTime:
		return fmt.Sprintf("amqp.annotation.x-opt-enqueued-time %s '%d'", op, sp.EnqueuedTime.UnixMilli())
	}
	return fmt.Sprintf("amqp.annotation.x-opt-offset %s '@latest'", op)
}

// ParseSelector parses the value of an `apache.org:selector-filter:string`
// source filter, exactly the forms the Event Hubs SDKs send:
//
//	amqp.annotation.x-opt-offset (>|>=) '<offset>'           offset: decimal >= 0, '-1' (earliest) or '@latest'
//	amqp.annotation.x-opt-sequence-number (>|>=) '<n>'       n: decimal int64 >= -1
//	amqp.annotation.x-opt-enqueued-time (>|>=) '<unix ms>'   decimal int64
//
// Any other text is an *Error with CondArgumentOutOfRange.
func ParseSelector(expr string) (StartPosition, error) {
	const prefix = "amqp.annotation."
	rest, ok := strings.CutPrefix(expr, prefix)
	if !ok {
		return StartPosition{}, errBadSelector(expr, "it must start with "+prefix)
	}
	name, rest, ok := strings.Cut(rest, " ")
	if !ok {
		return StartPosition{}, errBadSelector(expr, "missing operator")
	}
	var sp StartPosition
	switch name {
	case "x-opt-offset":
		sp.Kind = PositionOffset
	case "x-opt-sequence-number":
		sp.Kind = PositionSequenceNumber
	case "x-opt-enqueued-time":
		sp.Kind = PositionEnqueuedTime
	default:
		return StartPosition{}, errBadSelector(expr, fmt.Sprintf("unsupported annotation %q", name))
	}
	switch {
	case strings.HasPrefix(rest, ">= '"):
		sp.Inclusive = true
		rest = rest[len(">= '"):]
	case strings.HasPrefix(rest, "> '"):
		rest = rest[len("> '"):]
	default:
		return StartPosition{}, errBadSelector(expr, "operator must be '>' or '>=' followed by a quoted value")
	}
	val, ok := strings.CutSuffix(rest, "'")
	if !ok || strings.Contains(val, "'") {
		return StartPosition{}, errBadSelector(expr, "value must be one quoted string")
	}
	if sp.Kind == PositionOffset {
		switch val {
		case "-1":
			return Earliest(), nil
		case "@latest":
			return StartPosition{Kind: PositionLatest, Inclusive: sp.Inclusive}, nil
		}
	}
	n, err := parseDecimal(val)
	if err != nil {
		return StartPosition{}, errBadSelector(expr, err.Error())
	}
	switch sp.Kind {
	case PositionOffset:
		if n < 0 {
			return StartPosition{}, errBadSelector(expr, "offset must not be negative (except '-1')")
		}
		sp.Offset = n
	case PositionSequenceNumber:
		if n < -1 {
			return StartPosition{}, errBadSelector(expr, "sequence number must be -1 or more")
		}
		sp.SequenceNumber = n
	case PositionEnqueuedTime:
		sp.EnqueuedTime = time.UnixMilli(n).UTC()
	}
	return sp, nil
}

// parseDecimal accepts an optional '-' and 1 to 19 decimal digits.
func parseDecimal(s string) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	if digits == "" {
		return 0, fmt.Errorf("%q is not a decimal number", s)
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// resolveLocked turns sp into the sequence number of the first event to
// deliver; call with p.mu held. The result may lie before beginSeq (readers
// clamp) and is at most nextSeq.
func (p *partition) resolveLocked(sp StartPosition) (int64, error) {
	var pred func(recMeta) bool
	switch sp.Kind {
	case PositionEarliest:
		return p.beginSeq, nil
	case PositionLatest:
		return p.nextSeq, nil
	case PositionSequenceNumber:
		n := sp.SequenceNumber
		if !sp.Inclusive {
			n++
		}
		return min(max(n, 0), p.nextSeq), nil
	case PositionOffset:
		off := sp.Offset
		if sp.Inclusive {
			pred = func(m recMeta) bool { return m.offset >= off }
		} else {
			pred = func(m recMeta) bool { return m.offset > off }
		}
	case PositionEnqueuedTime:
		ms := sp.EnqueuedTime.UnixMilli()
		if sp.Inclusive {
			pred = func(m recMeta) bool { return m.ms >= ms }
		} else {
			pred = func(m recMeta) bool { return m.ms > ms }
		}
	default:
		return 0, &Error{Condition: CondArgumentOutOfRange, Description: fmt.Sprintf("unknown start position kind %d", int(sp.Kind))}
	}
	m, ok, err := p.findFirst(pred)
	if err != nil {
		return 0, err
	}
	if !ok {
		return p.nextSeq, nil
	}
	return m.seq, nil
}
