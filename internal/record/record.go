// Package record is the JSON form of an event and of a dead letter, shared by
// every place ehsink writes one as a line of JSON (the stdout sink, the
// dead-letter files of the runner and of the Parquet sink, `ehsink test`),
// so that all such files read the same way.
package record

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// Event is the JSON form of an event. The body is kept as JSON when it is
// valid JSON, and otherwise as a base64 string with BodyEncoding "base64".
type Event struct {
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

// NewEvent returns the JSON form of ev. The record shares ev's memory.
func NewEvent(ev *sinks.Event) Event {
	r := Event{
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

// DeadLetter is the JSON form of a dead letter: the event, the reason, the
// time it was given up on and, when known, the configuration revision that
// refused it.
type DeadLetter struct {
	Event
	Reason   string    `json:"reason"`
	FailedAt time.Time `json:"failed_at"`
	Revision string    `json:"config_revision,omitempty"`
}

// AppendDeadLetter appends d as one line of JSON. It never fails:
// application properties that JSON cannot hold are replaced by their printed
// form, so that a dead letter is never lost to its properties.
// revision is the connector's configuration revision (see package
// internal/deadletters), or "".
func AppendDeadLetter(dst []byte, d *sinks.DeadLetter, revision string) []byte {
	r := DeadLetter{Event: NewEvent(&d.Event), Reason: d.Reason, FailedAt: d.FailedAt.UTC(), Revision: revision}
	b, err := json.Marshal(r)
	if err != nil {
		r.Properties = map[string]any{"unencodable": fmt.Sprint(r.Properties)}
		b, _ = json.Marshal(r) // every remaining field encodes
	}
	return append(append(dst, b...), '\n')
}
