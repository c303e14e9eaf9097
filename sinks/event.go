package sinks

import (
	"fmt"
	"strconv"
	"time"
)

// Event is one Event Hubs event as the runner hands it to a sink. Events of one
// partition arrive in sequence-number order.
//
// A sink must not retain Body, RawBody or Properties after Write returns
// unless it copies them: the runner may reuse the memory for the next
// batch.
type Event struct {
	// Partition is the Event Hubs partition ID the event was read from.
	Partition string
	// SequenceNumber is the event's position in its partition, from 0.
	SequenceNumber int64
	// Offset is the service-assigned opaque position of the event.
	Offset string
	// EnqueuedTime is when the event was accepted by Event Hubs (UTC, ms precision).
	EnqueuedTime time.Time
	// PartitionKey is the key the event was sent with, or nil.
	PartitionKey *string
	// ContentType is the event's content type, or nil.
	ContentType *string
	// Properties are the event's application properties, or nil.
	Properties map[string]any
	// Body is the event payload, as the mapping reads it: as received, or
	// the runner's decoded form of it (see RawBody).
	Body []byte
	// RawBody is the payload as received when the runner hands on a
	// decoded form in Body (source.format avro: Body is then the JSON of
	// the record, and RawBody the Avro bytes with their framing), and nil
	// when Body is as received. A dead letter keeps the event as received:
	// a [DeadLetter]'s Event has this payload in Body, and RawBody nil.
	RawBody []byte
}

// Received returns e as it was received: with RawBody, when set, as its
// Body, and RawBody nil. What a dead letter keeps.
func (e *Event) Received() Event {
	r := *e
	if r.RawBody != nil {
		r.Body, r.RawBody = r.RawBody, nil
	}
	return r
}

// Position returns the position of e.
func (e *Event) Position() Position {
	return Position{SequenceNumber: e.SequenceNumber, Offset: e.Offset}
}

// String names the event for error messages and logs.
func (e *Event) String() string {
	return fmt.Sprintf("partition %s seq %d", e.Partition, e.SequenceNumber)
}

// Position is a place in a partition: the sequence number and offset of one
// event. A *Position that is nil means "nothing yet".
type Position struct {
	// SequenceNumber of the event.
	SequenceNumber int64
	// Offset of the event; may be empty when only the sequence number is known.
	Offset string
}

// String returns "seq N (offset O)", or "seq N" when the offset is not
// known: how tests and logs print a watermark.
func (p Position) String() string {
	if p.Offset == "" {
		return "seq " + strconv.FormatInt(p.SequenceNumber, 10)
	}
	return "seq " + strconv.FormatInt(p.SequenceNumber, 10) + " (offset " + p.Offset + ")"
}
