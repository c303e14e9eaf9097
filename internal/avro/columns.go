package avro

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// ColumnOptions say how [Columns] derives a mapping.
type ColumnOptions struct {
	// Flatten makes the fields of a nested record (a record field, or a
	// nullable one) columns of their own, named parent_child; if false, a
	// nested record is one json column.
	Flatten bool
	// AllNullable makes every field's column nullable. A connector that
	// reads each event with its own writer schema sets it: an event
	// written before a field was added lacks it, whatever the newest
	// schema says. If false, a column is nullable when its field's type
	// is a union with null.
	AllNullable bool
}

// metadataColumns are the event metadata columns `columns: auto` puts
// before the schema's fields, named and typed as the examples map them.
func metadataColumns() [3]struct{ name, from, typ string } {
	return [3]struct{ name, from, typ string }{
		{"partition", "@partition", "string"},
		{"seq", "@sequence_number", "int64"},
		{"enqueued_at", "@enqueued_time", "timestamp"},
	}
}

// Columns derives the column mapping of a record schema: the metadata
// columns, then one column per top-level field, in the schema's order,
// each mapped from the field's path in the JSON a [Program] renders, with
// the type that rendering parses into (see the package comment).
func Columns(s avro.Schema, o ColumnOptions) (mapping.Columns, error) {
	rec, ok := deref(s).(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("schema is a %s, not a record: columns: auto needs one field per column", deref(s).Type())
	}
	var cols mapping.Columns
	d := deriver{opts: o, seen: map[string]string{}, open: map[*avro.RecordSchema]bool{rec: true}}
	for _, m := range metadataColumns() {
		c, err := mapping.NewColumn(m.name, m.from, m.typ)
		if err != nil {
			return nil, err
		}
		cols = append(cols, c)
		d.seen[m.name] = m.from
	}
	if err := d.fields(&cols, rec, "", nil, false); err != nil {
		return nil, err
	}
	return cols, nil
}

type deriver struct {
	opts ColumnOptions
	seen map[string]string // column name -> what it maps, for collisions
	// open holds the records being flattened: a recursive record is a json
	// column where it recurs.
	open map[*avro.RecordSchema]bool
}

// fields appends the columns of rec's fields, named prefix+field and
// mapped from path+field; nullable says rec itself may be null.
func (d *deriver) fields(cols *mapping.Columns, rec *avro.RecordSchema, prefix string, path []mapping.Step, nullable bool) error {
	for _, f := range rec.Fields() {
		name := prefix + f.Name()
		at := append(path[:len(path):len(path)], mapping.Step{Key: f.Name(), Index: -1})
		t, null := unwrapNullable(f.Type())
		if sub, ok := t.(*avro.RecordSchema); ok && d.opts.Flatten && !d.open[sub] {
			d.open[sub] = true
			err := d.fields(cols, sub, name+"_", at, nullable || null)
			delete(d.open, sub)
			if err != nil {
				return err
			}
			continue
		}
		typ, err := columnType(t)
		if err != nil {
			return fmt.Errorf("field %s: %w", strings.Join(stepKeys(at), "."), err)
		}
		src := mapping.Source{Kind: mapping.SourceJSON, Path: at}
		if other, dup := d.seen[name]; dup {
			return fmt.Errorf("field %s: its column %q is also the column of %s; write the mapping by hand", src, name, other)
		}
		d.seen[name] = src.String()
		*cols = append(*cols, mapping.Column{Name: name, From: src, Type: typ, Nullable: nullable || null || d.opts.AllNullable})
	}
	return nil
}

func stepKeys(path []mapping.Step) []string {
	out := make([]string, len(path))
	for i, s := range path {
		out[i] = s.Key
	}
	return out
}

// unwrapNullable returns the one non-null branch of a union with null,
// and whether there was a null; any other schema is returned as it is.
func unwrapNullable(s avro.Schema) (avro.Schema, bool) {
	s = deref(s)
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return s, false
	}
	var (
		other avro.Schema
		null  bool
		n     int
	)
	for _, b := range u.Types() {
		if b.Type() == avro.Null {
			null = true
			continue
		}
		other = deref(b)
		n++
	}
	if n == 1 {
		return other, null
	}
	// Several non-null branches render as the branch's value: only a json
	// column takes any of them.
	return s, null
}

// columnType is the mapping type a value of s, rendered as JSON by a
// Program, parses into.
func columnType(s avro.Schema) (mapping.Type, error) {
	if f, ok := s.(*avro.FixedSchema); ok && logical(s) == nil && f.Size() == 16 && f.Prop("logicalType") == "uuid" {
		return mapping.Type{Kind: mapping.KindUUID}, nil
	}
	if l := logical(s); l != nil {
		switch l.Type() {
		case avro.Date:
			// Rendered as the day's midnight UTC: the mapping has no date.
			return mapping.Type{Kind: mapping.KindTimestamp}, nil
		case avro.TimestampMillis, avro.LocalTimestampMillis:
			return mapping.Type{Kind: mapping.KindTimestamp, Unit: mapping.Millis}, nil
		case avro.TimestampMicros, avro.LocalTimestampMicros:
			return mapping.Type{Kind: mapping.KindTimestamp, Unit: mapping.Micros}, nil
		case avro.TimeMillis, avro.TimeMicros:
			return mapping.Type{Kind: mapping.KindString}, nil
		case avro.UUID:
			return mapping.Type{Kind: mapping.KindUUID}, nil
		case avro.Decimal:
			dl := l.(*avro.DecimalLogicalSchema)
			if dl.Precision() > mapping.MaxDecimalPrecision {
				return mapping.Type{}, fmt.Errorf("decimal precision %d above %d", dl.Precision(), mapping.MaxDecimalPrecision)
			}
			return mapping.Type{Kind: mapping.KindDecimal, Precision: dl.Precision(), Scale: dl.Scale()}, nil
		}
	}
	switch s.Type() {
	case avro.Boolean:
		return mapping.Type{Kind: mapping.KindBoolean}, nil
	case avro.Int:
		return mapping.Type{Kind: mapping.KindInt32}, nil
	case avro.Long:
		return mapping.Type{Kind: mapping.KindInt64}, nil
	case avro.Float, avro.Double:
		return mapping.Type{Kind: mapping.KindDouble}, nil
	case avro.String, avro.Enum:
		return mapping.Type{Kind: mapping.KindString}, nil
	case avro.Bytes, avro.Fixed:
		return mapping.Type{Kind: mapping.KindBytes}, nil
	}
	// Records, arrays, maps, unions of several types, null: their JSON.
	return mapping.Type{Kind: mapping.KindJSON}, nil
}
