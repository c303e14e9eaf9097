package sinks

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
)

// EventRecord is the JSON form of an event wherever ehsink keeps one as a
// line of JSON (the stdout sink, dead-letter files), so that every such file
// reads the same way. The body is kept as JSON when it is valid JSON, and
// otherwise as a base64 string with BodyEncoding "base64".
type EventRecord struct {
	Partition      string          `json:"partition"`
	SequenceNumber int64           `json:"sequence_number"`
	Offset         string          `json:"offset"`
	EnqueuedTime   time.Time       `json:"enqueued_time"`
	PartitionKey   *string         `json:"partition_key,omitempty"`
	ContentType    *string         `json:"content_type,omitempty"`
	Properties     map[string]any  `json:"properties,omitempty"`
	Body           json.RawMessage `json:"body"`
	BodyEncoding   string          `json:"body_encoding,omitempty"`
}

// NewEventRecord returns the JSON form of ev. The record shares ev's memory.
func NewEventRecord(ev *Event) EventRecord {
	r := EventRecord{
		Partition:      ev.Partition,
		SequenceNumber: ev.SequenceNumber,
		Offset:         ev.Offset,
		EnqueuedTime:   ev.EnqueuedTime.UTC(),
		PartitionKey:   ev.PartitionKey,
		ContentType:    ev.ContentType,
		Properties:     ev.Properties,
	}
	if len(ev.Body) > 0 && json.Valid(ev.Body) {
		r.Body = ev.Body
	} else {
		r.Body, _ = json.Marshal(base64.StdEncoding.EncodeToString(ev.Body))
		r.BodyEncoding = "base64"
	}
	return r
}

// DeadLetterRecord is the JSON form of a dead letter: the event, the reason
// and the time it was given up on.
type DeadLetterRecord struct {
	EventRecord
	Reason   string    `json:"reason"`
	FailedAt time.Time `json:"failed_at"`
}

// AppendLine appends d as one line of JSON. It never fails: application
// properties that JSON cannot hold are replaced by their printed form, so
// that a dead letter is never lost to its properties.
func (d *DeadLetter) AppendLine(dst []byte) []byte {
	r := DeadLetterRecord{EventRecord: NewEventRecord(&d.Event), Reason: d.Reason, FailedAt: d.FailedAt.UTC()}
	b, err := json.Marshal(r)
	if err != nil {
		r.Properties = map[string]any{"unencodable": fmt.Sprint(r.Properties)}
		b, _ = json.Marshal(r) // every remaining field encodes
	}
	return append(append(dst, b...), '\n')
}
