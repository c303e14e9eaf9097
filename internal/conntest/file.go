package conntest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/ehsink/ehsink/internal/config"
)

// DefaultEnqueuedTime is the enqueued time of an event that names none.
var DefaultEnqueuedTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// File is a whole test file.
type File struct {
	// Tests are the cases, run in order.
	Tests []Case `yaml:"tests"`
}

// Case is one test: events given to one connector and what it must make of
// each.
type Case struct {
	// Name names the case in the report. Required.
	Name string `yaml:"name"`
	// Connector is the name of the connector under test. Required.
	Connector string `yaml:"connector"`
	// Events are the input events, at least one.
	Events []Event `yaml:"events"`
	// Expect has one expectation per event, in the same order.
	Expect []Expect `yaml:"expect"`
}

// Event is one input event.
type Event struct {
	// Body is sent as is when it is a string, as JSON otherwise.
	Body any `yaml:"body"`
	// Key is the partition key; absent means none.
	Key *string `yaml:"key"`
	// AvroSchema is the Avro schema (a file, relative to the test file, or
	// the schema's JSON) the body, a record written as JSON, is encoded
	// with, for a connector with source.format avro. Required for such a
	// connector, refused for others.
	AvroSchema string `yaml:"avro_schema"`
	// ContentType is the event's content type; absent means none.
	ContentType *string `yaml:"content_type"`
	// Properties are the application properties.
	Properties map[string]any `yaml:"properties"`
	// Partition is the partition ID. If empty, "0".
	Partition string `yaml:"partition"`
	// SequenceNumber is the event's sequence number. If absent, the
	// event's index in its case.
	SequenceNumber *int64 `yaml:"sequence_number"`
	// Offset is the event's offset. If empty, the sequence number's text.
	Offset string `yaml:"offset"`
	// EnqueuedTime is when the event was enqueued. If absent,
	// [DefaultEnqueuedTime].
	EnqueuedTime Timestamp `yaml:"enqueued_time"`
}

// Timestamp is an RFC 3339 time of a test file, quoted or not.
type Timestamp struct {
	time.Time
}

// UnmarshalConfig implements [config.Unmarshaler].
func (t *Timestamp) UnmarshalConfig(raw any) error {
	switch v := raw.(type) {
	case nil:
		return nil
	case time.Time:
		t.Time = v.UTC()
		return nil
	case string:
		p, err := parseTime(v)
		t.Time = p
		return err
	}
	return errors.New("want an RFC 3339 time such as 2026-03-01T10:00:00Z")
}

// Expect is what one event must become: exactly one of Row, Record and
// DeadLetter, or Route or Table alone (a row of that route or table,
// whatever its values).
type Expect struct {
	// Row maps column names to values (sinks with a column mapping).
	Row map[string]any `yaml:"row"`
	// Route is the name of the route the event takes (a connector with
	// routes): the route's `name`, or its table or path as written.
	Route *string `yaml:"route"`
	// Table is the table the event goes to (a postgres connector with
	// routes), as rendered from a templated table.
	Table *string `yaml:"table"`
	// Record is the stdout sink's envelope fields (a map) or raw line (a string).
	Record any `yaml:"record"`
	// DeadLetter is a substring of the dead letter's reason.
	DeadLetter *string `yaml:"dead_letter"`
	// Filtered, when true, expects the connector's filter to drop the event.
	Filtered bool `yaml:"filtered"`
	// Delete maps key column names to the values of the key the event
	// deletes (a postgres connector with format: debezium or a delete
	// block). With routes, Route or Table may name where.
	Delete map[string]any `yaml:"delete"`
	// Skipped, when true, expects the event to write nothing and be no dead
	// letter (a Debezium tombstone).
	Skipped bool `yaml:"skipped"`
	// Rows expects an event of a connector whose mapping explodes an
	// array to make these rows, one per element, in order; an empty list
	// expects no row (an empty array).
	Rows []map[string]any `yaml:"rows"`
	// Elements is Rows with each element's own outcome: {row: ...} or
	// {dead_letter: ...} (an element that does not convert).
	Elements []Expect `yaml:"elements"`
}

// MalformedError is a test file that cannot be run; Problems name the path
// of each bad field, such as `tests[2].events[0].enqueued_time`.
type MalformedError struct {
	// Path is the test file.
	Path string
	// Problems are the file's problems, each with its path in the file.
	Problems []*config.Error
}

// Error lists every problem on its own line after the file's path.
func (e *MalformedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: invalid test file", e.Path)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}

// DefaultPath returns the test file beside a config file:
// connectors.yaml → connectors_test.yaml.
func DefaultPath(configPath string) string {
	ext := filepath.Ext(configPath)
	return strings.TrimSuffix(configPath, ext) + "_test" + ext
}

// ReadFile reads and decodes a test file strictly (unknown keys are
// errors). A file that does not decode is a [*MalformedError]; the checks
// that need the connectors are made by [Run].
func ReadFile(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read test file: %w", err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, &MalformedError{Path: path, Problems: []*config.Error{{Err: err}}}
	}
	var f File
	if err := config.Decode(raw, &f); err != nil {
		return nil, &MalformedError{Path: path, Problems: config.Errors(err)}
	}
	return &f, nil
}
