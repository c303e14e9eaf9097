package mapping

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is a logical column type, without its parameters.
type Kind uint8

// The logical kinds. The zero Kind is invalid: a [Type] must be parsed or
// set explicitly.
const (
	KindInvalid   Kind = iota
	KindString         // UTF-8 text
	KindInt32          // 32-bit signed integer
	KindInt64          // 64-bit signed integer
	KindDouble         // IEEE 754 binary64
	KindDecimal        // exact decimal with a precision and scale
	KindBoolean        // true or false
	KindTimestamp      // an instant, in UTC
	KindJSON           // raw JSON text
	KindUUID           // 16-byte UUID
	KindBytes          // raw bytes
)

// String returns the canonical name of k.
func (k Kind) String() string {
	switch k {
	case KindInvalid:
		return "invalid"
	case KindString:
		return "string"
	case KindInt32:
		return "int32"
	case KindInt64:
		return "int64"
	case KindDouble:
		return "double"
	case KindDecimal:
		return "decimal"
	case KindBoolean:
		return "boolean"
	case KindTimestamp:
		return "timestamp"
	case KindJSON:
		return "json"
	case KindUUID:
		return "uuid"
	case KindBytes:
		return "bytes"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// TimeUnit is the precision of a timestamp. The zero value is microseconds,
// PostgreSQL's precision.
type TimeUnit uint8

// The timestamp units.
const (
	Micros TimeUnit = iota // microseconds (the default)
	Millis                 // milliseconds
)

// String returns "us" or "ms".
func (u TimeUnit) String() string {
	if u == Millis {
		return "ms"
	}
	return "us"
}

// MaxDecimalPrecision is the largest decimal precision a mapping accepts
// (PostgreSQL's limit for a declared numeric precision).
const MaxDecimalPrecision = 1000

// Type is a logical column type: a kind and, for decimals, precision and
// scale, and for timestamps a unit. The zero Type is invalid.
type Type struct {
	// Kind is the logical kind.
	Kind Kind
	// Precision is the total number of significant digits of a decimal,
	// 1..MaxDecimalPrecision. Zero means unconstrained (PostgreSQL's plain
	// numeric): values keep the scale they were written with. A sink that
	// needs a fixed precision (Parquet) rejects zero in its own validation.
	Precision int
	// Scale is the number of digits after the decimal point of a decimal,
	// 0..Precision. Values with more digits are rounded half away from
	// zero, as PostgreSQL does.
	Scale int
	// Unit is the precision of a timestamp; values are truncated to it.
	Unit TimeUnit
}

// DecimalType returns decimal(precision, scale).
func DecimalType(precision, scale int) Type {
	return Type{Kind: KindDecimal, Precision: precision, Scale: scale}
}

// String returns the canonical spelling of t, which ParseType accepts:
// "string", "decimal(12,2)", "decimal", "timestamp", "timestamp(ms)".
func (t Type) String() string {
	switch t.Kind {
	case KindDecimal:
		if t.Precision == 0 {
			return "decimal"
		}
		return "decimal(" + strconv.Itoa(t.Precision) + "," + strconv.Itoa(t.Scale) + ")"
	case KindTimestamp:
		if t.Unit == Millis {
			return "timestamp(ms)"
		}
		return "timestamp"
	}
	return t.Kind.String()
}

// Valid reports whether t is a usable type.
func (t Type) Valid() bool {
	switch t.Kind {
	case KindInvalid:
		return false
	case KindDecimal:
		if t.Precision == 0 {
			return t.Scale == 0
		}
		return t.Precision > 0 && t.Precision <= MaxDecimalPrecision && t.Scale >= 0 && t.Scale <= t.Precision
	default:
		return t.Kind <= KindBytes
	}
}

// kindByName maps every accepted spelling (lower case, single spaces) to
// its kind: the canonical names, the PostgreSQL names and common aliases.
func kindByName(name string) (Kind, bool) {
	switch name {
	case "string", "text", "varchar", "character varying":
		return KindString, true
	case "int32", "int", "integer", "int4":
		return KindInt32, true
	case "int64", "bigint", "int8", "long":
		return KindInt64, true
	case "double", "double precision", "float8", "float64", "float":
		return KindDouble, true
	case "decimal", "numeric":
		return KindDecimal, true
	case "boolean", "bool":
		return KindBoolean, true
	case "timestamp", "timestamptz", "timestamp with time zone":
		return KindTimestamp, true
	case "json", "jsonb":
		return KindJSON, true
	case "uuid":
		return KindUUID, true
	case "bytes", "bytea", "binary":
		return KindBytes, true
	}
	return KindInvalid, false
}

// ParseType parses a type name: a canonical name (string, int32, int64,
// double, decimal(p,s), boolean, timestamp, json, uuid, bytes) or a
// PostgreSQL alias (text, integer, bigint, double precision, float8,
// numeric, numeric(p), numeric(p,s), bool, timestamptz, jsonb, bytea).
// Timestamps take an optional unit: timestamp(ms) or timestamp(us).
// Case and extra spaces do not matter.
func ParseType(s string) (Type, error) {
	name := strings.ToLower(strings.Join(strings.Fields(s), " "))
	var args string
	if i := strings.IndexByte(name, '('); i >= 0 {
		if !strings.HasSuffix(name, ")") {
			return Type{}, fmt.Errorf("type %q: missing closing parenthesis", s)
		}
		args = strings.TrimSpace(name[i+1 : len(name)-1])
		name = strings.TrimSpace(name[:i])
	}
	kind, ok := kindByName(name)
	if !ok {
		return Type{}, fmt.Errorf("unknown type %q (want one of string, int32, int64, double, decimal(p,s), boolean, timestamp, json, uuid, bytes, or a PostgreSQL name such as text, bigint, numeric(12,2), timestamptz, jsonb)", s)
	}
	t := Type{Kind: kind}
	switch {
	case args == "" && strings.Contains(s, "("):
		return Type{}, fmt.Errorf("type %q: empty parameters", s)
	case args == "":
	case kind == KindDecimal:
		p, sc, found := strings.Cut(args, ",")
		var err error
		if t.Precision, err = strconv.Atoi(strings.TrimSpace(p)); err != nil || t.Precision < 1 || t.Precision > MaxDecimalPrecision {
			return Type{}, fmt.Errorf("type %q: precision must be an integer from 1 to %d", s, MaxDecimalPrecision)
		}
		if found {
			if t.Scale, err = strconv.Atoi(strings.TrimSpace(sc)); err != nil || t.Scale < 0 || t.Scale > t.Precision {
				return Type{}, fmt.Errorf("type %q: scale must be an integer from 0 to the precision", s)
			}
		}
	case kind == KindTimestamp:
		switch args {
		case "ms", "millis", "3":
			t.Unit = Millis
		case "us", "micros", "6":
			t.Unit = Micros
		default:
			return Type{}, fmt.Errorf("type %q: unit must be ms or us", s)
		}
	default:
		return Type{}, fmt.Errorf("type %q: %s takes no parameters", s, kind)
	}
	return t, nil
}

// UnmarshalText parses a type name with ParseType.
func (t *Type) UnmarshalText(b []byte) error {
	v, err := ParseType(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalText writes the canonical name of t.
func (t Type) MarshalText() ([]byte, error) { return []byte(t.String()), nil }
