// Package jsonfiles is an example of a custom ehsink sink, written the way a
// user writes one: its own package, registered under a type name in init,
// with a config block decoded strictly by ehsink, and tested with the
// conformance kit. cmd/ehsink-jsonfiles is its binary: a main of a few
// lines over package cli, with every ehsink command and this sink next to
// the stdout one.
//
// Each flush writes the events it commits as one JSON-lines file,
// DIR/PARTITION/FIRST-LAST.jsonl (sequence numbers, zero-padded), under a
// temporary name that is fsynced and renamed into place. The file names
// are the sink's watermark: Open reads the newest one, and Flush drops what
// a newer file (written meanwhile by another owner of the partition)
// already covers, so a replay or a second owner writes nothing twice.
package jsonfiles

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

func init() { sinks.Register("jsonfiles", Driver{}) }

// Config is the sink's `sink:` block.
type Config struct {
	// Dir is where the files go. Required.
	Dir string `yaml:"dir"`
	// Columns, if set, make each line's body an object of these columns
	// (the column mapping of the built-in sinks: `name: $.path` or
	// `{from, type}`), so `ehsink test` can check the rows. If empty, the
	// body is the event's JSON body as it came.
	Columns table.Columns `yaml:"columns"`
}

// Validate implements sinks.Validator.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, &sinks.FieldError{Field: "dir", Err: errors.New("required")})
	}
	if len(c.Columns) > 0 {
		if _, err := table.Compile(c.Columns); err != nil {
			errs = append(errs, &sinks.FieldError{Field: "columns", Err: err})
		}
	}
	return errors.Join(errs...)
}

// TableShape offers the columns to `ehsink test` (package sinks/table):
// its rows are the objects the writer makes. Without columns the sink
// writes bodies as they came and has no mapping to test.
func (c *Config) TableShape() (table.Shape, error) {
	return table.Shape{Routes: []table.Route{{Name: c.Dir, Dest: c.Dir, Columns: c.Columns}}}, nil
}

// Driver builds jsonfiles sinks.
type Driver struct{}

// NewConfig implements sinks.Driver.
func (Driver) NewConfig() any { return &Config{} }

// New implements sinks.Driver.
func (Driver) New(_ context.Context, cfg any, _ sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("jsonfiles: config is %T, want *jsonfiles.Config", cfg)
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("jsonfiles: %w", err)
	}
	s := &Sink{dir: c.Dir}
	if len(c.Columns) > 0 {
		m, err := table.Compile(c.Columns)
		if err != nil {
			return nil, fmt.Errorf("jsonfiles: columns: %w", err)
		}
		s.mapper = m
	}
	return s, nil
}

// Sink writes JSON-lines files under one directory. It is safe for
// concurrent use; each writer owns one partition's folder.
type Sink struct {
	dir    string
	mapper *table.Mapper // nil: bodies as they came; safe for concurrent use
}

// Open implements sinks.Sink.
func (s *Sink) Open(_ context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if partition == "" || filepath.Base(partition) != partition {
		return nil, nil, fmt.Errorf("jsonfiles: bad partition ID %q", partition)
	}
	dir := filepath.Join(s.dir, partition)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("jsonfiles: %w", err)
	}
	wm, err := newest(dir)
	if err != nil {
		return nil, nil, err
	}
	return &writer{dir: dir, mapper: s.mapper}, wm, nil
}

// Close implements sinks.Sink.
func (s *Sink) Close(context.Context) error { return nil }

// line is what each event becomes.
type line struct {
	Seq    int64           `json:"seq"`
	Offset string          `json:"offset"`
	Body   json.RawMessage `json:"body"`
}

type writer struct {
	dir     string
	mapper  *table.Mapper
	pending []sinks.Event
}

func (w *writer) Write(_ context.Context, events []sinks.Event) error {
	var failed []sinks.EventError
	for i, ev := range events {
		if w.mapper != nil {
			body, err := w.row(&ev)
			if err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
				continue
			}
			ev.Body = body
		} else if !json.Valid(ev.Body) {
			failed = append(failed, sinks.EventError{Index: i, Err: errors.New("body is not JSON")})
			continue
		} else {
			ev.Body = append([]byte(nil), ev.Body...) // the runner may reuse the batch
		}
		w.pending = append(w.pending, ev)
	}
	if failed != nil {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

func (w *writer) Flush(context.Context) (*sinks.Position, error) {
	wm, err := newest(w.dir)
	if err != nil {
		return nil, err
	}
	events := dedupe.After(w.pending, wm)
	if len(events) == 0 {
		w.pending = w.pending[:0]
		return wm, nil
	}
	var buf []byte
	for _, ev := range events {
		b, err := json.Marshal(line{Seq: ev.SequenceNumber, Offset: ev.Offset, Body: ev.Body})
		if err != nil {
			return nil, fmt.Errorf("jsonfiles: seq %d: %w", ev.SequenceNumber, err)
		}
		buf = append(append(buf, b...), '\n')
	}
	first, last := events[0], events[len(events)-1]
	name := fmt.Sprintf("%020d-%020d.jsonl", first.SequenceNumber, last.SequenceNumber)
	if err := writeAtomic(filepath.Join(w.dir, name), buf); err != nil {
		return nil, err
	}
	w.pending = w.pending[:0]
	pos := last.Position()
	return &pos, nil
}

// row maps ev by the columns into a JSON object (column name → value).
func (w *writer) row(ev *sinks.Event) ([]byte, error) {
	cols := w.mapper.Columns()
	vals := make([]any, len(cols))
	if err := w.mapper.Map(ev, vals); err != nil {
		return nil, err // a column error naming the column
	}
	obj := make(map[string]any, len(cols))
	for i, c := range cols {
		switch v := vals[i].(type) {
		case table.Decimal:
			obj[c.Name] = json.Number(v.String())
		case []byte:
			obj[c.Name] = string(v)
		default:
			obj[c.Name] = v
		}
	}
	return json.Marshal(obj)
}

func (w *writer) Close(context.Context) error {
	w.pending = nil
	return nil
}

// newest returns the position of the last event of the newest file in dir.
// The offset is left empty: a checkpoint carries it, and the runner needs
// only the sequence number to drop what a file covers.
func newest(dir string) (*sinks.Position, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("jsonfiles: %w", err)
	}
	var wm *sinks.Position
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok {
			continue // temporary files and strangers
		}
		_, lastText, ok := strings.Cut(name, "-")
		last, err := strconv.ParseInt(lastText, 10, 64)
		if !ok || err != nil {
			continue
		}
		wm = dedupe.Later(wm, &sinks.Position{SequenceNumber: last})
	}
	return wm, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("jsonfiles: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("jsonfiles: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("jsonfiles: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("jsonfiles: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("jsonfiles: publish %s: %w", path, err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("jsonfiles: %w", err)
	}
	defer d.Close()
	return d.Sync()
}
