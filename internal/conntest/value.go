package conntest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// value is a column value ready to compare: key is equal for equal values
// of the column's type (12.5 and 12.50 as decimals, two spellings of one
// instant), show is what the diff prints.
type value struct {
	key, show string
}

var null = value{key: "null", show: "null"}

// gotValue renders a value made by [mapping.Mapper.Map] for column c.
func gotValue(c mapping.Column, v any) value {
	switch x := v.(type) {
	case nil:
		return null
	case string:
		return value{key: "s" + x, show: strconv.Quote(x)}
	case int32:
		return intValue(int64(x))
	case int64:
		return intValue(x)
	case float64:
		return floatValue(x)
	case mapping.Decimal:
		return decimalValue(x.String())
	case bool:
		return value{key: strconv.FormatBool(x), show: strconv.FormatBool(x)}
	case time.Time:
		return timeValue(x)
	case json.RawMessage:
		return jsonValue(x)
	case [16]byte:
		s := fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:])
		return value{key: "u" + s, show: s}
	case []byte:
		return value{key: "b" + string(x), show: strconv.Quote(string(x))}
	}
	return value{key: fmt.Sprintf("%T:%v", v, v), show: fmt.Sprintf("%v (%T)", v, v)}
}

// wantValue renders an expected value from the test file (a YAML scalar,
// map or list) as column c's type would hold it; a value that cannot be of
// that type is an error.
func wantValue(c mapping.Column, v any) (value, error) {
	if v == nil {
		return null, nil
	}
	if t, ok := v.(time.Time); ok {
		v = t.UTC().Format(time.RFC3339Nano)
	}
	text, scalar := scalarText(v)
	switch c.Type.Kind {
	case mapping.KindString:
		if scalar {
			return value{key: "s" + text, show: strconv.Quote(text)}, nil
		}
	case mapping.KindInt32, mapping.KindInt64:
		if n, err := strconv.ParseInt(text, 10, 64); scalar && err == nil {
			return intValue(n), nil
		}
		return value{}, fmt.Errorf("want an integer for %s column %q", c.Type, c.Name)
	case mapping.KindDouble:
		if f, err := strconv.ParseFloat(text, 64); scalar && err == nil {
			return floatValue(f), nil
		}
		return value{}, fmt.Errorf("want a number for %s column %q", c.Type, c.Name)
	case mapping.KindDecimal:
		if _, ok := new(big.Rat).SetString(text); scalar && ok {
			return decimalValue(text), nil
		}
		return value{}, fmt.Errorf("want a number for %s column %q", c.Type, c.Name)
	case mapping.KindBoolean:
		if b, err := strconv.ParseBool(text); scalar && err == nil {
			return value{key: strconv.FormatBool(b), show: strconv.FormatBool(b)}, nil
		}
		return value{}, fmt.Errorf("want true or false for %s column %q", c.Type, c.Name)
	case mapping.KindTimestamp:
		if t, err := time.Parse(time.RFC3339Nano, text); scalar && err == nil {
			return timeValue(t), nil
		}
		return value{}, fmt.Errorf("want an RFC 3339 time (2026-03-01T10:00:00Z) for %s column %q", c.Type, c.Name)
	case mapping.KindJSON:
		// A string is the JSON text itself; anything else is encoded.
		raw := []byte(text)
		if _, isString := v.(string); !isString {
			var err error
			if raw, err = json.Marshal(v); err != nil {
				return value{}, fmt.Errorf("column %q: %w", c.Name, err)
			}
		}
		if !json.Valid(raw) {
			return value{}, fmt.Errorf("want JSON text (or a YAML value to encode) for json column %q", c.Name)
		}
		return jsonValue(raw), nil
	case mapping.KindUUID:
		if scalar {
			s := strings.ToLower(strings.Trim(text, "{}"))
			return value{key: "u" + s, show: s}, nil
		}
	case mapping.KindBytes:
		if scalar {
			return value{key: "b" + text, show: strconv.Quote(text)}, nil
		}
	}
	return value{}, fmt.Errorf("want a scalar for %s column %q", c.Type, c.Name)
}

// scalarText returns the text of a YAML scalar, and false for maps and lists.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int32: // an int32 column read back from a Parquet file
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), true
	}
	return "", false
}

func intValue(n int64) value {
	s := strconv.FormatInt(n, 10)
	return value{key: "i" + s, show: s}
}

func floatValue(f float64) value {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	return value{key: "f" + s, show: s}
}

// decimalValue keys a decimal by its exact rational value, so that 12.5
// and 12.50 are equal.
func decimalValue(text string) value {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		return value{key: "d?" + text, show: text}
	}
	if _, exp, sci := strings.Cut(text, "e-"); sci {
		// A Parquet reader's unscaled value and scale (1250e-2): shown
		// as ehsink test shows the mapped decimal (12.50).
		if scale, err := strconv.Atoi(exp); err == nil {
			text = r.FloatString(scale)
		}
	}
	return value{key: "d" + r.RatString(), show: text}
}

func timeValue(t time.Time) value {
	s := t.UTC().Format(time.RFC3339Nano)
	return value{key: "t" + s, show: s}
}

// jsonValue keys JSON by its meaning: object keys sorted, spacing dropped.
func jsonValue(raw []byte) value {
	var x any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return value{key: "j?" + string(raw), show: string(raw)}
	}
	norm, err := json.Marshal(normalizeNumbers(x))
	if err != nil {
		return value{key: "j?" + string(raw), show: string(raw)}
	}
	return value{key: "j" + string(norm), show: string(norm)}
}

// normalizeNumbers replaces JSON numbers by a canonical spelling, so that
// 1.0 and 1 compare equal without losing the digits of large integers.
func normalizeNumbers(x any) any {
	switch v := x.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range v {
			v[i] = normalizeNumbers(e)
		}
	case json.Number:
		if r, ok := new(big.Rat).SetString(string(v)); ok {
			if r.IsInt() {
				return json.Number(r.Num().String())
			}
			f, _ := r.Float64()
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
		}
	}
	return x
}
