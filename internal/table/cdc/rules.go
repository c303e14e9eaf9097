package cdc

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// Format says what an event body is.
type Format string

// The formats.
const (
	// FormatJSON: the body is the row, read by the column mapping. The
	// default.
	FormatJSON Format = "json"
	// FormatDebezium: the body is a Debezium change event; the column
	// mapping reads its after image, and op d deletes the key of its
	// before image.
	FormatDebezium Format = "debezium"
)

// Delete is the `delete:` block of a sink: which events delete their key,
// and where a delete finds the key's values.
type Delete struct {
	// When is the condition that makes an event a delete, in the filter
	// expression language ("$.op == 'd'", "@properties.kind == 'deleted'").
	// Required with format json; not allowed with format debezium, whose
	// op field decides.
	When string `yaml:"when"`
	// Key maps each key column to the source of its value in a delete
	// event (a JSON path or metadata, as in the column mapping). A key
	// column not listed takes its mapping's source. With format debezium
	// the paths read the before image (or the record key).
	Key map[string]string `yaml:"key"`
}

// Op is what an event does to its key.
type Op uint8

// The ops.
const (
	// OpUpsert writes the row.
	OpUpsert Op = iota
	// OpDelete deletes the row of the key; only the key columns of the row
	// are set.
	OpDelete
	// OpSkip writes nothing: the event carries no change (a Debezium
	// tombstone, an empty body), and only moves the watermark.
	OpSkip
)

// String names the op.
func (o Op) String() string {
	switch o {
	case OpUpsert:
		return "upsert"
	case OpDelete:
		return "delete"
	case OpSkip:
		return "skip"
	}
	return fmt.Sprintf("Op(%d)", o)
}

// Spec is what Compile needs of a sink's configuration.
type Spec struct {
	// Format of the bodies; empty means FormatJSON.
	Format Format
	// Delete, when not nil, enables deletes for format json; format
	// debezium deletes without it (it may still name key sources).
	Delete *Delete
	// Columns is the column mapping.
	Columns mapping.Columns
	// Key lists the key columns (an upsert's conflict target). Required
	// when the spec deletes.
	Key []string
}

// Validate reports the problems of s as [*sinks.FieldError] values with
// paths relative to the sink block ("delete.when", "format"), joined.
func (s *Spec) Validate() error {
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	switch s.Format {
	case "", FormatJSON, FormatDebezium:
	default:
		fe("format", fmt.Errorf("%q: want json or debezium", s.Format))
	}
	if !s.Deletes() {
		return errors.Join(errs...)
	}
	what := "delete"
	if s.Format == FormatDebezium {
		what = "format: debezium"
	}
	if len(s.Key) == 0 {
		fe("key", fmt.Errorf("required with %s (the key a delete removes; use mode: upsert)", what))
	}
	if d := s.Delete; d != nil {
		switch {
		case s.Format == FormatDebezium && d.When != "":
			fe("delete.when", errors.New("not used with format: debezium (op d deletes)"))
		case s.Format != FormatDebezium && strings.TrimSpace(d.When) == "":
			fe("delete.when", errors.New(`required: the condition that makes an event a delete, such as "$.op == 'd'"`))
		case d.When != "":
			if _, err := compileCondition(d.When); err != nil {
				fe("delete.when", err)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(d.Key)) {
			if !slices.Contains(s.Key, name) {
				fe("delete.key."+name, fmt.Errorf("not a key column (key: %s)", strings.Join(s.Key, ", ")))
				continue
			}
			if _, err := mapping.ParseSource(d.Key[name]); err != nil {
				fe("delete.key."+name, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Deletes reports whether the spec turns some events into deletes.
func (s Spec) Deletes() bool { return s.Format == FormatDebezium || s.Delete != nil }

// Rules turn events into upserts, deletes and skips. They are safe for
// concurrent use.
type Rules struct {
	debezium bool
	when     condition // nil: no delete condition
	rows     *mapping.Mapper
	keys     *mapping.Mapper // the key columns, from the delete sources; nil without deletes
	keyIdx   []int           // where each key column sits in a row
}

// Compile validates s and builds its rules. Key columns are made
// non-nullable: a row or a delete without its key cannot be written.
func Compile(s Spec) (*Rules, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cols := slices.Clone(s.Columns)
	for i := range cols {
		if slices.Contains(s.Key, cols[i].Name) {
			cols[i].Nullable = false
		}
	}
	rows, err := mapping.Compile(cols)
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	r := &Rules{debezium: s.Format == FormatDebezium, rows: rows}
	if !s.Deletes() {
		return r, nil
	}
	var keyCols mapping.Columns
	for _, k := range s.Key {
		i := cols.Index(k)
		if i < 0 {
			return nil, &sinks.FieldError{Field: "key", Err: fmt.Errorf("%q is not a mapped column", k)}
		}
		c := cols[i]
		if s.Delete != nil && s.Delete.Key[k] != "" {
			src, err := mapping.ParseSource(s.Delete.Key[k])
			if err != nil {
				return nil, &sinks.FieldError{Field: "delete.key." + k, Err: err}
			}
			c.From = src
		}
		keyCols = append(keyCols, c)
		r.keyIdx = append(r.keyIdx, i)
	}
	if r.keys, err = mapping.Compile(keyCols); err != nil {
		return nil, fmt.Errorf("delete key: %w", err)
	}
	if s.Delete != nil && s.Delete.When != "" {
		if r.when, err = compileCondition(s.Delete.When); err != nil {
			return nil, &sinks.FieldError{Field: "delete.when", Err: err}
		}
	}
	return r, nil
}

// Columns returns the mapping's columns (key columns non-nullable). The
// caller must not modify them.
func (r *Rules) Columns() mapping.Columns { return r.rows.Columns() }

// Deletes reports whether some events may be deletes.
func (r *Rules) Deletes() bool { return r.keys != nil }

// Map decides what ev does and fills row (one value per column, as
// [mapping.Mapper.Map] does): the whole row for OpUpsert; the key columns
// for OpDelete, every other value nil; nothing for OpSkip. An event that
// cannot be read returns an error, which is that event's alone (a
// [*mapping.ColumnError], a condition that cannot be evaluated, a body that
// is not a change event).
func (r *Rules) Map(ev *sinks.Event, row []any) (Op, error) {
	if r.debezium {
		return r.mapDebezium(ev, row)
	}
	if r.when != nil {
		del, err := r.when(ev)
		if err != nil {
			return OpUpsert, fmt.Errorf("delete.when: %w", err)
		}
		if del {
			return OpDelete, r.mapKey(ev, row)
		}
	}
	return OpUpsert, r.rows.Map(ev, row)
}

// mapDebezium applies a Debezium change event: c (insert), u (update) and r
// (snapshot read) write the after image, d deletes the key of the before
// image, or of the record key when there is no before image. An empty or
// null body is the tombstone Kafka Connect writes after a delete: skipped.
func (r *Rules) mapDebezium(ev *sinks.Event, row []any) (Op, error) {
	if IsTombstone(ev.Body) {
		return OpSkip, nil
	}
	c, err := decodeDebezium(ev.Body)
	if err != nil {
		return OpUpsert, err
	}
	img := *ev
	switch c.op {
	case "c", "u", "r":
		if c.after == nil {
			return OpUpsert, fmt.Errorf("Debezium op %q without an after image", c.op)
		}
		img.Body = c.after
		return OpUpsert, r.rows.Map(&img, row)
	case "d":
		switch {
		case c.before != nil:
			img.Body = c.before
		case ev.PartitionKey != nil && *ev.PartitionKey != "":
			if img.Body, err = decodeDebeziumKey([]byte(*ev.PartitionKey)); err != nil {
				return OpDelete, fmt.Errorf("Debezium delete without a before image: partition key: %w", err)
			}
		default:
			return OpDelete, errors.New("Debezium delete without a before image or a record key in the partition key")
		}
		return OpDelete, r.mapKey(&img, row)
	case "t":
		return OpUpsert, errors.New(`Debezium op "t" (truncate) is not replicated: truncate the table by hand, then skip the event`)
	}
	return OpUpsert, fmt.Errorf("Debezium op %q is not a row change (want c, u, r or d)", c.op)
}

// IsTombstone reports whether body is the tombstone Kafka Connect writes
// after a Debezium delete: empty, or JSON null. With format debezium it is
// skipped, before anything else reads the body (a route's condition).
func IsTombstone(body []byte) bool {
	body = bytes.TrimSpace(body)
	return len(body) == 0 || bytes.Equal(body, []byte("null"))
}

// mapKey maps the key columns of a delete into row.
func (r *Rules) mapKey(ev *sinks.Event, row []any) error {
	clear(row)
	vals := make([]any, len(r.keyIdx))
	if err := r.keys.Map(ev, vals); err != nil {
		return err
	}
	for i, j := range r.keyIdx {
		row[j] = vals[i]
	}
	return nil
}
