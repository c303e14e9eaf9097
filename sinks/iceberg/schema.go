package iceberg

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/arrow-go/v18/arrow/memory"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// maxDecimalPrecision is the largest decimal precision Iceberg has.
const maxDecimalPrecision = 38

// icebergType is the Iceberg type of a mapped column. JSON is kept as a
// string, which every engine shows as text; a timestamp is an instant
// (timestamptz, microseconds).
func icebergType(t mapping.Type) (ice.Type, error) {
	switch t.Kind {
	case mapping.KindString, mapping.KindJSON:
		return ice.PrimitiveTypes.String, nil
	case mapping.KindInt32:
		return ice.PrimitiveTypes.Int32, nil
	case mapping.KindInt64:
		return ice.PrimitiveTypes.Int64, nil
	case mapping.KindDouble:
		return ice.PrimitiveTypes.Float64, nil
	case mapping.KindBoolean:
		return ice.PrimitiveTypes.Bool, nil
	case mapping.KindTimestamp:
		return ice.PrimitiveTypes.TimestampTz, nil
	case mapping.KindUUID:
		return ice.PrimitiveTypes.UUID, nil
	case mapping.KindBytes:
		return ice.PrimitiveTypes.Binary, nil
	case mapping.KindDecimal:
		switch {
		case t.Precision <= 0:
			return nil, errors.New("decimal needs a precision for Iceberg, such as decimal(12,2)")
		case t.Precision > maxDecimalPrecision:
			return nil, fmt.Errorf("decimal precision %d is over Iceberg's %d", t.Precision, maxDecimalPrecision)
		}
		return ice.DecimalTypeOf(t.Precision, t.Scale), nil
	}
	return nil, fmt.Errorf("type %s has no Iceberg column type", t)
}

// newSchema is the schema of a table the sink creates: one top-level field
// per column, in mapping order, required unless nullable.
func newSchema(cols mapping.Columns) (*ice.Schema, error) {
	fields := make([]ice.NestedField, len(cols))
	for i, c := range cols {
		t, err := icebergType(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		fields[i] = ice.NestedField{ID: i + 1, Name: c.Name, Type: t, Required: !c.Nullable}
	}
	return ice.NewSchema(0, fields...), nil
}

// newSpec is the partition spec of a table the sink creates.
func newSpec(parts []partitionField, sc *ice.Schema) (ice.PartitionSpec, error) {
	var opts []ice.PartitionOption
	for i, p := range parts {
		t, err := p.transform()
		if err != nil {
			return ice.PartitionSpec{}, fmt.Errorf("partition[%d].transform: %w", i, err)
		}
		opts = append(opts, ice.AddPartitionFieldByName(p.Column, p.name(t), t, sc, nil))
	}
	spec, err := ice.NewPartitionSpecOpts(opts...)
	if err != nil {
		return ice.PartitionSpec{}, fmt.Errorf("partition: %w", err)
	}
	return spec, nil
}

// fileSchema checks that the sink's columns fit an existing table's schema
// and returns the schema of the files the sink writes: the columns, in
// mapping order, with the table's field IDs. Each column must be a
// top-level field of the same type (a timestamp may be timestamp or
// timestamptz; an int32 column may be a long field), required only if the
// column is not nullable; fields the columns leave out must be optional.
func fileSchema(tbl *ice.Schema, cols mapping.Columns) (*ice.Schema, error) {
	var errs []error
	fields := make([]ice.NestedField, 0, len(cols))
	for _, c := range cols {
		want, err := icebergType(c.Type)
		if err != nil {
			errs = append(errs, fmt.Errorf("column %q: %w", c.Name, err))
			continue
		}
		f, ok := tbl.FindFieldByName(c.Name)
		if !ok {
			errs = append(errs, fmt.Errorf("column %q: the table has no such field (its fields: %s; evolve: true adds it)", c.Name, fieldNames(tbl)))
			continue
		}
		if _, top := topLevel(tbl, f.ID); !top {
			errs = append(errs, fmt.Errorf("column %q: the table's field is nested, not top-level", c.Name))
			continue
		}
		switch {
		case f.Type.Equals(want):
		case c.Type.Kind == mapping.KindTimestamp && f.Type.Equals(ice.PrimitiveTypes.Timestamp):
			want = f.Type
		case c.Type.Kind == mapping.KindInt32 && f.Type.Equals(ice.PrimitiveTypes.Int64):
			want = f.Type
		default:
			errs = append(errs, fmt.Errorf("column %q (%s): the table's field is %s, the column needs %s", c.Name, c.Type, f.Type, want))
			continue
		}
		if f.Required && c.Nullable {
			errs = append(errs, fmt.Errorf("column %q: the table's field is required, the column nullable (a null would not fit)", c.Name))
			continue
		}
		fields = append(fields, ice.NestedField{ID: f.ID, Name: f.Name, Type: want, Required: f.Required, Doc: f.Doc})
	}
	for _, f := range tbl.Fields() {
		if f.Required && cols.Index(f.Name) < 0 {
			errs = append(errs, fmt.Errorf("field %q: the table requires it and no column maps it", f.Name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ice.NewSchema(tbl.ID, fields...), nil
}

func topLevel(sc *ice.Schema, id int) (ice.NestedField, bool) {
	for _, f := range sc.Fields() {
		if f.ID == id {
			return f, true
		}
	}
	return ice.NestedField{}, false
}

func fieldNames(sc *ice.Schema) string {
	var out []byte
	for i, f := range sc.Fields() {
		if i > 0 {
			out = append(out, ", "...)
		}
		out = append(out, f.Name...)
	}
	return string(out)
}

// arrowSchema is the Arrow schema of the files, with the field IDs.
func arrowSchema(sc *ice.Schema) (*arrow.Schema, error) {
	return table.SchemaToArrowSchema(sc, nil, true, false)
}

// rowBuilder gathers mapped rows into Arrow columns. It is used by one
// writer at a time.
type rowBuilder struct {
	cols   mapping.Columns
	schema *arrow.Schema
	b      *array.RecordBuilder
	rows   int64
	bytes  int64 // an estimate of the gathered values' size
}

func newRowBuilder(cols mapping.Columns, sc *arrow.Schema) *rowBuilder {
	return &rowBuilder{cols: cols, schema: sc, b: array.NewRecordBuilder(memory.DefaultAllocator, sc)}
}

// check converts a mapped row without appending it: the error names the
// column whose value does not fit, and the row is then left out whole.
func (r *rowBuilder) check(vals []any) error { return checkRow(r.cols, vals, r.schema) }

// checkRow checks a mapped row against the columns and, when sc is set,
// the nullability of the table's fields.
func checkRow(cols mapping.Columns, vals []any, sc *arrow.Schema) error {
	for i, c := range cols {
		if vals[i] == nil {
			if !c.Nullable || sc != nil && !sc.Field(i).Nullable {
				return fmt.Errorf("column %q: null in a non-nullable column", c.Name)
			}
			continue
		}
		if err := checkValue(c, vals[i]); err != nil {
			return fmt.Errorf("column %q (%s): %w", c.Name, c.Type, err)
		}
	}
	return nil
}

// add appends a row that check accepted.
func (r *rowBuilder) add(vals []any) {
	for i := range r.cols {
		r.bytes += appendValue(r.b.Field(i), r.cols[i], vals[i])
	}
	r.rows++
}

// record returns the gathered rows as a record and starts anew.
func (r *rowBuilder) record() arrow.RecordBatch {
	r.rows, r.bytes = 0, 0
	return r.b.NewRecordBatch()
}

// release frees the builder's memory.
func (r *rowBuilder) release() { r.b.Release() }

func checkValue(c mapping.Column, v any) error {
	ok := false
	switch c.Type.Kind {
	case mapping.KindString:
		_, ok = v.(string)
	case mapping.KindJSON:
		switch v.(type) {
		case json.RawMessage, []byte, string:
			ok = true
		}
	case mapping.KindInt32:
		_, ok = v.(int32)
	case mapping.KindInt64:
		_, ok = v.(int64)
	case mapping.KindDouble:
		_, ok = v.(float64)
	case mapping.KindBoolean:
		_, ok = v.(bool)
	case mapping.KindTimestamp:
		_, ok = v.(time.Time)
	case mapping.KindUUID:
		_, ok = v.([16]byte)
	case mapping.KindBytes:
		_, ok = v.([]byte)
	case mapping.KindDecimal:
		d, isDec := v.(mapping.Decimal)
		if !isDec {
			break
		}
		if int(d.Scale) != c.Type.Scale {
			return fmt.Errorf("decimal %s has scale %d, the column %d", d, d.Scale, c.Type.Scale)
		}
		if d.BigInt().CmpAbs(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(c.Type.Precision)), nil)) >= 0 {
			return fmt.Errorf("decimal %s is out of range for precision %d", d, c.Type.Precision)
		}
		return nil
	}
	if !ok {
		return fmt.Errorf("mapped value of Go type %T does not fit", v)
	}
	return nil
}

// appendValue appends v (checked) to b and returns its estimated size.
func appendValue(b array.Builder, c mapping.Column, v any) int64 {
	if v == nil {
		b.AppendNull()
		return 1
	}
	switch c.Type.Kind {
	case mapping.KindString:
		s := v.(string)
		b.(*array.StringBuilder).Append(s)
		return int64(len(s)) + 4
	case mapping.KindJSON:
		var s []byte
		switch x := v.(type) {
		case json.RawMessage:
			s = x
		case []byte:
			s = x
		case string:
			s = []byte(x)
		}
		b.(*array.StringBuilder).BinaryBuilder.Append(s)
		return int64(len(s)) + 4
	case mapping.KindInt32:
		switch bb := b.(type) {
		case *array.Int32Builder:
			bb.Append(v.(int32))
		case *array.Int64Builder: // a long field of an existing table
			bb.Append(int64(v.(int32)))
		}
		return 4
	case mapping.KindInt64:
		b.(*array.Int64Builder).Append(v.(int64))
	case mapping.KindDouble:
		b.(*array.Float64Builder).Append(v.(float64))
	case mapping.KindBoolean:
		b.(*array.BooleanBuilder).Append(v.(bool))
		return 1
	case mapping.KindTimestamp:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.(time.Time).UnixMicro()))
	case mapping.KindUUID:
		u := v.([16]byte)
		b.(*extensions.UUIDBuilder).Append(uuid.UUID(u))
		return 16
	case mapping.KindBytes:
		x := v.([]byte)
		b.(*array.BinaryBuilder).Append(x)
		return int64(len(x)) + 4
	case mapping.KindDecimal:
		b.(*array.Decimal128Builder).Append(decimal128.FromBigInt(v.(mapping.Decimal).BigInt()))
		return 16
	}
	return 8
}
