package parquetfile

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/uncompressed"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// orderedGroup is the root of a file schema: a parquet.Group (a map, whose
// fields come out sorted by name) that keeps the mapping's column order.
type orderedGroup struct {
	pq.Group
	fields []pq.Field
}

// Fields returns the fields in mapping order.
func (g orderedGroup) Fields() []pq.Field { return g.fields }

// Schema turns a mapping into a Parquet schema: one top-level leaf
// column per mapped column, in mapping order, optional when nullable, with
// dictionary encoding on every column that supports it.
func Schema(name string, cols mapping.Columns) (*pq.Schema, error) {
	g := make(pq.Group, len(cols))
	for _, c := range cols {
		n, err := LeafNode(c.Type)
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", c.Name, err)
		}
		if c.Type.Kind != mapping.KindBoolean {
			// Statistics and dictionaries are on: the writer falls back to
			// plain pages when a column's dictionary outgrows
			// dictionaryMaxBytes.
			n = pq.Encoded(n, &pq.RLEDictionary)
		}
		if c.Nullable {
			n = pq.Optional(n)
		} else {
			n = pq.Required(n)
		}
		g[c.Name] = n
	}
	og := orderedGroup{Group: g}
	byName := make(map[string]pq.Field, len(cols))
	for _, f := range g.Fields() {
		byName[f.Name()] = f
	}
	for _, c := range cols {
		og.fields = append(og.fields, byName[c.Name])
	}
	return pq.NewSchema(name, og), nil
}

// LeafNode is the Parquet node of a logical type. JSON is kept as a UTF-8
// string (not the JSON logical type) so that every reader shows it as text.
func LeafNode(t mapping.Type) (pq.Node, error) {
	switch t.Kind {
	case mapping.KindString, mapping.KindJSON:
		return pq.String(), nil
	case mapping.KindInt32:
		return pq.Int(32), nil
	case mapping.KindInt64:
		return pq.Int(64), nil
	case mapping.KindDouble:
		return pq.Leaf(pq.DoubleType), nil
	case mapping.KindBoolean:
		return pq.Leaf(pq.BooleanType), nil
	case mapping.KindTimestamp:
		if t.Unit == mapping.Millis {
			return pq.Timestamp(pq.Millisecond), nil
		}
		return pq.Timestamp(pq.Microsecond), nil
	case mapping.KindUUID:
		return pq.UUID(), nil
	case mapping.KindBytes:
		return pq.Leaf(pq.ByteArrayType), nil
	case mapping.KindDecimal:
		switch {
		case t.Precision <= 0:
			return nil, fmt.Errorf("decimal needs a precision for Parquet, such as decimal(12,2)")
		case t.Precision <= 9:
			return pq.Decimal(t.Scale, t.Precision, pq.Int32Type), nil
		case t.Precision <= 18:
			return pq.Decimal(t.Scale, t.Precision, pq.Int64Type), nil
		case t.Precision <= maxDecimalPrecision:
			return pq.Decimal(t.Scale, t.Precision, pq.FixedLenByteArrayType(decimalBytes(t.Precision))), nil
		default:
			return nil, fmt.Errorf("decimal precision %d is over the %d this sink writes", t.Precision, maxDecimalPrecision)
		}
	}
	return nil, fmt.Errorf("type %s has no Parquet column type", t)
}

// maxDecimalPrecision is the largest decimal precision written: 38 digits,
// as in Spark, Hive, Arrow's decimal128 and most readers.
const maxDecimalPrecision = 38

// decimalBytes is the fixed length holding an unscaled value of precision
// digits in two's complement.
func decimalBytes(precision int) int {
	bits := math.Ceil(float64(precision)*math.Log2(10)) + 1
	return int(math.Ceil(bits / 8))
}

// Codec returns the compression codec by its config name.
func Codec(name string) (compress.Codec, error) {
	switch name {
	case "", "zstd":
		return &ZstdCodec{}, nil
	case "snappy":
		return &snappy.Codec{}, nil
	case "none":
		return &uncompressed.Codec{}, nil
	}
	return nil, fmt.Errorf("unknown compression %q (want zstd, snappy or none)", name)
}

// converter turns mapped Go values into Parquet values for one column.
type converter struct {
	col      mapping.Column
	index    int // leaf column index
	maxDef   int // 1 for optional columns
	fixedLen int // decimal fixed length, when stored as bytes
}

func newConverters(cols mapping.Columns) []converter {
	cs := make([]converter, len(cols))
	for i, c := range cols {
		cs[i] = converter{col: c, index: i}
		if c.Nullable {
			cs[i].maxDef = 1
		}
		if c.Type.Kind == mapping.KindDecimal && c.Type.Precision > 18 {
			cs[i].fixedLen = decimalBytes(c.Type.Precision)
		}
	}
	return cs
}

// value converts v, as produced by mapping for the column's type, to a
// Parquet value with its levels. Byte values alias v, which is fine:
// mapped values never alias the event, and the writer copies on WriteRows.
func (c *converter) value(v any) (pq.Value, error) {
	if v == nil {
		if c.maxDef == 0 {
			return pq.Value{}, fmt.Errorf("column %q: null in a non-nullable column", c.col.Name)
		}
		return pq.NullValue().Level(0, 0, c.index), nil
	}
	pv, err := c.convert(v)
	if err != nil {
		return pq.Value{}, fmt.Errorf("column %q (%s): %w", c.col.Name, c.col.Type, err)
	}
	return pv.Level(0, c.maxDef, c.index), nil
}

func (c *converter) convert(v any) (pq.Value, error) {
	switch c.col.Type.Kind {
	case mapping.KindString:
		if s, ok := v.(string); ok {
			return pq.ByteArrayValue([]byte(s)), nil
		}
	case mapping.KindJSON:
		switch x := v.(type) {
		case json.RawMessage:
			return pq.ByteArrayValue(x), nil
		case []byte:
			return pq.ByteArrayValue(x), nil
		case string:
			return pq.ByteArrayValue([]byte(x)), nil
		}
	case mapping.KindInt32:
		if x, ok := v.(int32); ok {
			return pq.Int32Value(x), nil
		}
	case mapping.KindInt64:
		if x, ok := v.(int64); ok {
			return pq.Int64Value(x), nil
		}
	case mapping.KindDouble:
		if x, ok := v.(float64); ok {
			return pq.DoubleValue(x), nil
		}
	case mapping.KindBoolean:
		if x, ok := v.(bool); ok {
			return pq.BooleanValue(x), nil
		}
	case mapping.KindTimestamp:
		if x, ok := v.(time.Time); ok {
			if c.col.Type.Unit == mapping.Millis {
				return pq.Int64Value(x.UnixMilli()), nil
			}
			return pq.Int64Value(x.UnixMicro()), nil
		}
	case mapping.KindUUID:
		if x, ok := v.([16]byte); ok {
			return pq.FixedLenByteArrayValue(x[:]), nil
		}
	case mapping.KindBytes:
		if x, ok := v.([]byte); ok {
			return pq.ByteArrayValue(x), nil
		}
	case mapping.KindDecimal:
		return c.decimal(v)
	}
	return pq.Value{}, fmt.Errorf("mapped value of Go type %T does not fit", v)
}

// decimal stores a mapping.Decimal as the column's physical type: its
// unscaled value as int32, int64, or big-endian two's complement bytes.
func (c *converter) decimal(v any) (pq.Value, error) {
	d, ok := v.(mapping.Decimal)
	if !ok {
		return pq.Value{}, fmt.Errorf("mapped value of Go type %T does not fit", v)
	}
	if int(d.Scale) != c.col.Type.Scale {
		return pq.Value{}, fmt.Errorf("decimal %s has scale %d, the column %d", d, d.Scale, c.col.Type.Scale)
	}
	p := c.col.Type.Precision
	if d.Big == nil {
		switch {
		case p <= 9 && d.Coef >= math.MinInt32 && d.Coef <= math.MaxInt32:
			return pq.Int32Value(int32(d.Coef)), nil
		case p > 9 && p <= 18:
			return pq.Int64Value(d.Coef), nil
		case p <= 9:
			return pq.Value{}, fmt.Errorf("decimal %s is out of range", d)
		}
	} else if p <= 18 {
		return pq.Value{}, fmt.Errorf("decimal %s is out of range", d)
	}
	b, err := twosComplement(d.BigInt(), c.fixedLen)
	if err != nil {
		return pq.Value{}, fmt.Errorf("decimal %s: %w", d, err)
	}
	return pq.FixedLenByteArrayValue(b), nil
}

// twosComplement writes x big-endian in n bytes of two's complement.
func twosComplement(x *big.Int, n int) ([]byte, error) {
	if x.BitLen() >= n*8 {
		return nil, fmt.Errorf("does not fit in %d bytes", n)
	}
	out := make([]byte, n)
	if x.Sign() >= 0 {
		x.FillBytes(out)
		return out, nil
	}
	// -x = ^(x-1): write |x|-1 and flip every bit.
	m := new(big.Int).Neg(x)
	m.Sub(m, big.NewInt(1))
	m.FillBytes(out)
	for i := range out {
		out[i] = ^out[i]
	}
	return out, nil
}
