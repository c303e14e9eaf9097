package stdout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

func init() { sinks.Register("stdout", driver{}) }

// Config is the stdout sink's `sink:` block.
type Config struct {
	// Format is json (an envelope per line: partition, sequence_number,
	// offset, enqueued_time, partition_key, properties, body) or raw (the
	// body as is, one per line). If empty, json.
	Format string `yaml:"format"`
	// Output is stdout or stderr. If empty, stdout.
	Output string `yaml:"output"`
	// Columns, if set (json format), make each line a JSON object of these
	// columns, in their order, instead of the envelope: the column mapping
	// of the table sinks (`name: $.path`, `@sequence_number`, `{from,
	// type}`), for lines short enough to read. An event that does not map
	// is a dead letter.
	Columns mapping.Columns `yaml:"columns"`
}

// Destination says where the sink writes, for the connector's start line.
func (c *Config) Destination() string {
	out := c.Output
	if out == "" {
		out = "stdout"
	}
	switch {
	case c.Format == "raw":
		return out + ", one body per line"
	case len(c.Columns) > 0:
		return out + ", one line of " + strings.Join(c.Columns.Names(), ", ") + " per event"
	}
	return out + ", one JSON envelope per event"
}

// Validate implements sinks.Validator.
func (c *Config) Validate() error {
	var errs []error
	switch c.Format {
	case "", "json", "raw":
	default:
		errs = append(errs, &sinks.FieldError{Field: "format", Err: fmt.Errorf("unknown format %q (want json or raw)", c.Format)})
	}
	switch c.Output {
	case "", "stdout", "stderr":
	default:
		errs = append(errs, &sinks.FieldError{Field: "output", Err: fmt.Errorf("unknown output %q (want stdout or stderr)", c.Output)})
	}
	if len(c.Columns) > 0 {
		if c.Format == "raw" {
			errs = append(errs, &sinks.FieldError{Field: "columns", Err: errors.New("used with format json (raw writes the body as is)")})
		} else if _, err := mapping.Compile(c.Columns); err != nil {
			errs = append(errs, &sinks.FieldError{Field: "columns", Err: err})
		}
	}
	return errors.Join(errs...)
}

// Envelope reports whether a line without columns is the JSON envelope
// (format json) rather than the body as is.
func (c *Config) Envelope() bool { return c.Format != "raw" }

// Line returns the line the sink writes for ev when it has no columns,
// without its newline: the writer and `ehsink test` both call it. Only an
// envelope can fail: a property value JSON cannot hold.
func (c *Config) Line(ev *sinks.Event) ([]byte, error) {
	if !c.Envelope() {
		return ev.Body, nil
	}
	line, err := json.Marshal(record.NewEvent(ev))
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	return line, nil
}

// TableShape makes a sink with columns a table sink for `ehsink test`
// (rows, checked by the columns' types); without columns it has none.
func (c *Config) TableShape() (table.Shape, error) {
	if len(c.Columns) == 0 || c.Format == "raw" {
		return table.Shape{}, nil
	}
	return table.Shape{Routes: []table.Route{{Name: "stdout", Dest: c.Output, Columns: c.Columns}}}, nil
}

type driver struct{}

func (driver) NewConfig() any { return &Config{Format: "json", Output: "stdout"} }

func (driver) New(_ context.Context, cfg any, _ sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("stdout: config is %T, want *stdout.Config", cfg)
	}
	out := io.Writer(os.Stdout)
	if c.Output == "stderr" {
		out = os.Stderr
	}
	return newSink(out, *c), nil
}

// sink writes lines to one io.Writer. It is safe for concurrent use.
type sink struct {
	cfg    Config
	mapper *mapping.Mapper // Config.Columns compiled; nil: Config.Line
	mu     sync.Mutex      // guards out
	out    *bufio.Writer
}

// newSink returns a sink writing to w. Columns that do not compile (a config
// that was not validated) are ignored: lines are then envelopes.
func newSink(w io.Writer, cfg Config) *sink {
	s := &sink{cfg: cfg, out: bufio.NewWriterSize(w, 64<<10)}
	if len(cfg.Columns) > 0 && cfg.Envelope() {
		s.mapper, _ = mapping.Compile(cfg.Columns)
	}
	return s
}

// Open implements sinks.Sink. The stdout sink keeps no watermark.
func (s *sink) Open(_ context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	return &writer{s: s}, nil, nil
}

// Close implements sinks.Sink; it flushes what is buffered in the shared
// output and does not close the underlying writer.
func (s *sink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Flush()
}

type writer struct {
	s    *sink
	buf  bytes.Buffer
	last *sinks.Position
	row  []any // scratch of appendRow
}

func (w *writer) Write(_ context.Context, events []sinks.Event) error {
	var failed []sinks.EventError
	for i := range events {
		ev := &events[i]
		if w.s.mapper != nil {
			if err := w.appendRow(ev); err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
			}
			continue
		}
		line, err := w.s.cfg.Line(ev)
		if err != nil {
			failed = append(failed, sinks.EventError{Index: i, Err: err})
			continue
		}
		w.buf.Write(line)
		w.buf.WriteByte('\n')
	}
	if len(events) > 0 {
		p := events[len(events)-1].Position()
		w.last = &p
	}
	if failed != nil {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// appendRow appends ev's mapped columns to the buffer as one JSON object,
// keys in the columns' order.
func (w *writer) appendRow(ev *sinks.Event) error {
	cols := w.s.mapper.Columns()
	if cap(w.row) < len(cols) {
		w.row = make([]any, len(cols))
	}
	row := w.row[:len(cols)]
	if err := w.s.mapper.Map(ev, row); err != nil {
		return err // a *mapping.ColumnError naming the column
	}
	line := []byte{'{'}
	for i, c := range cols {
		if i > 0 {
			line = append(line, ',')
		}
		name, _ := json.Marshal(c.Name)
		v := row[i]
		switch x := v.(type) {
		case mapping.Decimal:
			v = json.Number(x.String())
		case []byte:
			v = string(x)
		}
		val, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("column %q: %w", c.Name, err)
		}
		line = append(append(append(line, name...), ':'), val...)
	}
	clear(row)
	w.buf.Write(append(line, '}', '\n'))
	return nil
}

func (w *writer) Flush(context.Context) (*sinks.Position, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.buf.Len() > 0 {
		if _, err := w.s.out.Write(w.buf.Bytes()); err != nil {
			return nil, fmt.Errorf("stdout: write: %w", err)
		}
		w.buf.Reset()
	}
	if err := w.s.out.Flush(); err != nil {
		return nil, fmt.Errorf("stdout: flush: %w", err)
	}
	return w.last, nil
}

func (w *writer) Close(context.Context) error {
	w.buf.Reset()
	return nil
}
