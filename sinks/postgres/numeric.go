package postgres

import (
	"encoding/binary"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// numericCodec is pgx's numeric codec taught to encode mapping.Decimal
// directly. Going through pgtype.Numeric costs a big.Int per value and
// big-number division per encode, which was the largest allocation of a
// row in the benchmark; an int64 coefficient encodes with none.
type numericCodec struct{ pgtype.NumericCodec }

// PlanEncode returns the direct plan for mapping.Decimal and pgx's
// otherwise.
func (c numericCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(mapping.Decimal); ok {
		if format == pgtype.BinaryFormatCode {
			return decimalBinaryPlan{}
		}
		return decimalTextPlan{}
	}
	return c.NumericCodec.PlanEncode(m, oid, format, value)
}

// registerTypes installs the sink's codecs on a new connection.
func registerTypes(conn *pgx.Conn) {
	conn.TypeMap().RegisterType(&pgtype.Type{Name: "numeric", OID: pgtype.NumericOID, Codec: numericCodec{}})
}

type decimalTextPlan struct{}

func (decimalTextPlan) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(mapping.Decimal).String()...), nil
}

type decimalBinaryPlan struct{}

// Encode writes the binary numeric format: ndigits, weight, sign, dscale
// (int16 each), then ndigits base-10000 digits, most significant first.
func (decimalBinaryPlan) Encode(value any, buf []byte) ([]byte, error) {
	d := value.(mapping.Decimal)
	if d.Big != nil {
		n := pgtype.Numeric{Int: d.Big, Exp: -d.Scale, Valid: true}
		return pgtype.NumericCodec{}.PlanEncode(nil, pgtype.NumericOID, pgtype.BinaryFormatCode, n).Encode(n, buf)
	}
	neg := d.Coef < 0
	u := uint64(d.Coef)
	if neg {
		u = -u // two's complement: right for math.MinInt64 too
	}
	var dec [20]byte
	digits := strconv.AppendUint(dec[:0], u, 10)
	scale := int(d.Scale)
	intLen := len(digits) - scale // decimal digits before the point; may be <= 0

	// Lay the digits out aligned on base-10000 groups around the point.
	leftPad := 0
	if intLen > 0 {
		leftPad = (4 - intLen%4) % 4
	} else {
		leftPad = -intLen // zeros between the point and the first digit
	}
	fracLen := scale
	rightPad := (4 - fracLen%4) % 4
	var padded [64]byte
	all := padded[:0]
	for range leftPad {
		all = append(all, '0')
	}
	all = append(all, digits...)
	for range rightPad {
		all = append(all, '0')
	}
	intGroups := 0
	if intLen > 0 {
		intGroups = (intLen + leftPad) / 4
	}
	weight := intGroups - 1
	groups := len(all) / 4
	first, last := 0, groups
	for first < last && string(all[first*4:first*4+4]) == "0000" {
		first++
		weight--
	}
	for last > first && string(all[last*4-4:last*4]) == "0000" {
		last--
	}
	ndigits := last - first
	if ndigits == 0 {
		weight, neg = 0, false
	}
	sign := uint16(0)
	if neg {
		sign = 0x4000
	}
	buf = binary.BigEndian.AppendUint16(buf, uint16(ndigits))
	buf = binary.BigEndian.AppendUint16(buf, uint16(int16(weight)))
	buf = binary.BigEndian.AppendUint16(buf, sign)
	buf = binary.BigEndian.AppendUint16(buf, uint16(scale))
	for g := first; g < last; g++ {
		q := all[g*4 : g*4+4]
		v := uint16(q[0]-'0')*1000 + uint16(q[1]-'0')*100 + uint16(q[2]-'0')*10 + uint16(q[3]-'0')
		buf = binary.BigEndian.AppendUint16(buf, v)
	}
	return buf, nil
}
