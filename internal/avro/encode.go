package avro

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
)

// Encode returns the Avro binary of the JSON value text written with
// schema s. The JSON is read as [Program.AppendJSON] renders (a union's
// value unwrapped, timestamps as RFC 3339 strings or Unix milliseconds,
// decimals as numbers, bytes as base64), so that what a connector's test
// or `ehsink send --avro` writes reads back as it was written. A missing
// record field takes its default.
func Encode(s avro.Schema, text []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	var buf bytes.Buffer
	w := avro.NewWriter(&buf, 512)
	if err := encode(w, s, v, "$"); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encode(w *avro.Writer, s avro.Schema, v any, at string) error {
	s = deref(s)
	bad := func(want string) error { return fmt.Errorf("%s: %s is not %s", at, describe(v), want) }
	view, scale := viewOf(s)
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return bad("null")
		}
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return bad("a boolean")
		}
		w.WriteBool(b)
	case avro.Int, avro.Long:
		n, err := integer(v, view)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if s.Type() == avro.Int {
			if n < math.MinInt32 || n > math.MaxInt32 {
				return fmt.Errorf("%s: %d is out of range for int", at, n)
			}
			w.WriteInt(int32(n))
		} else {
			w.WriteLong(n)
		}
	case avro.Float, avro.Double:
		var f float64
		switch x := v.(type) {
		case json.Number:
			var err error
			if f, err = x.Float64(); err != nil {
				return bad("a number")
			}
		case string:
			var err error
			if f, err = strconv.ParseFloat(x, 64); err != nil {
				return bad("a number")
			}
		default:
			return bad("a number")
		}
		if s.Type() == avro.Float {
			w.WriteFloat(float32(f))
		} else {
			w.WriteDouble(f)
		}
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		w.WriteString(str)
	case avro.Bytes, avro.Fixed:
		b, err := byteValue(v, view, scale)
		if err != nil {
			return fmt.Errorf("%s: %w", at, err)
		}
		if f, ok := s.(*avro.FixedSchema); ok {
			if view == vDecimal {
				b = signExtend(b, f.Size())
			}
			if len(b) != f.Size() {
				return fmt.Errorf("%s: %d bytes for a fixed of %d", at, len(b), f.Size())
			}
			_, _ = w.Write(b)
		} else {
			w.WriteBytes(b)
		}
	case avro.Enum:
		str, ok := v.(string)
		if !ok {
			return bad("a string")
		}
		i := -1
		for k, sym := range s.(*avro.EnumSchema).Symbols() {
			if sym == str {
				i = k
			}
		}
		if i < 0 {
			return fmt.Errorf("%s: %q is not a symbol of %s", at, str, s.(*avro.EnumSchema).FullName())
		}
		w.WriteInt(int32(i))
	case avro.Array:
		a, ok := v.([]any)
		if !ok {
			return bad("an array")
		}
		if len(a) > 0 {
			w.WriteBlockHeader(int64(len(a)), 0)
			for i, e := range a {
				if err := encode(w, s.(*avro.ArraySchema).Items(), e, at+"["+strconv.Itoa(i)+"]"); err != nil {
					return err
				}
			}
		}
		w.WriteBlockHeader(0, 0)
	case avro.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		if len(m) > 0 {
			w.WriteBlockHeader(int64(len(m)), 0)
			for k, e := range m {
				w.WriteString(k)
				if err := encode(w, s.(*avro.MapSchema).Values(), e, at+"."+k); err != nil {
					return err
				}
			}
		}
		w.WriteBlockHeader(0, 0)
	case avro.Record:
		m, ok := v.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, f := range s.(*avro.RecordSchema).Fields() {
			fv, ok := m[f.Name()]
			if !ok {
				if !f.HasDefault() {
					return fmt.Errorf("%s.%s: missing, and the field has no default", at, f.Name())
				}
				def, _ := json.Marshal(f.Default())
				d := json.NewDecoder(bytes.NewReader(def))
				d.UseNumber()
				if err := d.Decode(&fv); err != nil {
					return fmt.Errorf("%s.%s: default: %w", at, f.Name(), err)
				}
			}
			if err := encode(w, f.Type(), fv, at+"."+f.Name()); err != nil {
				return err
			}
		}
	case avro.Union:
		var errs []error
		for i, b := range s.(*avro.UnionSchema).Types() {
			// Try the branch on a scratch writer: a failed try must leave
			// nothing behind.
			var buf bytes.Buffer
			bw := avro.NewWriter(&buf, 64)
			if err := encode(bw, b, v, at); err != nil {
				errs = append(errs, err)
				continue
			}
			_ = bw.Flush()
			w.WriteLong(int64(i))
			_, _ = w.Write(buf.Bytes())
			return nil
		}
		return fmt.Errorf("%s: %s fits no branch of the union: %w", at, describe(v), errors.Join(errs...))
	default:
		return fmt.Errorf("%s: unsupported schema type %s", at, s.Type())
	}
	return nil
}

func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// integer reads an int or long, a timestamp or date from an RFC 3339
// string, a time of day from "15:04:05.000".
func integer(v any, view view) (int64, error) {
	if s, ok := v.(string); ok {
		switch view {
		case vTimestampMillis, vTimestampMicros, vDate:
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				if t, err = time.Parse(time.DateOnly, s); err != nil {
					return 0, fmt.Errorf("%q is not an RFC 3339 timestamp", s)
				}
			}
			switch view {
			case vTimestampMillis:
				return t.UnixMilli(), nil
			case vTimestampMicros:
				return t.UnixMicro(), nil
			}
			return t.Unix() / 86400, nil
		case vTimeMillis, vTimeMicros:
			t, err := time.Parse("15:04:05.999999999", s)
			if err != nil {
				return 0, fmt.Errorf("%q is not a time of day", s)
			}
			d := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
			if view == vTimeMillis {
				return d.Milliseconds(), nil
			}
			return d.Microseconds(), nil
		}
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%s is not an integer", describe(v))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer", n)
	}
	return i, nil
}

// byteValue reads bytes from base64, a decimal from a number or string,
// a uuid from its string.
func byteValue(v any, view view, scale int) ([]byte, error) {
	switch view {
	case vDecimal:
		var text string
		switch x := v.(type) {
		case json.Number:
			text = x.String()
		case string:
			text = x
		default:
			return nil, fmt.Errorf("%s is not a decimal", describe(v))
		}
		r, ok := new(big.Rat).SetString(text)
		if !ok {
			return nil, fmt.Errorf("%q is not a decimal", text)
		}
		r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(scale)), nil)))
		if !r.IsInt() {
			return nil, fmt.Errorf("%s has more than %d digits after the point", text, scale)
		}
		return twosComplement(r.Num()), nil
	case vUUIDFixed:
		s, ok := v.(string)
		if !ok || len(s) != 36 {
			return nil, fmt.Errorf("%s is not a UUID", describe(v))
		}
		b := make([]byte, 0, 16)
		for _, part := range strings.Split(s, "-") {
			var err error
			if b, err = appendHex(b, part); err != nil {
				return nil, fmt.Errorf("%q is not a UUID", s)
			}
		}
		return b, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("%s is not base64 bytes", describe(v))
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not base64", s)
	}
	return b, nil
}

func appendHex(b []byte, s string) ([]byte, error) {
	if len(s)%2 != 0 {
		return b, errors.New("odd hex")
	}
	for i := 0; i < len(s); i += 2 {
		n, err := strconv.ParseUint(s[i:i+2], 16, 8)
		if err != nil {
			return b, err
		}
		b = append(b, byte(n))
	}
	return b, nil
}

// twosComplement returns n as the shortest big-endian two's complement.
func twosComplement(n *big.Int) []byte {
	if n.Sign() >= 0 {
		b := n.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
		return b
	}
	// -n = 2^k - |n| for the smallest k that keeps the sign bit.
	k := uint((n.BitLen()/8 + 1) * 8)
	m := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), k), n)
	b := m.Bytes()
	for len(b) < int(k/8) {
		b = append([]byte{0}, b...)
	}
	return b
}

func signExtend(b []byte, size int) []byte {
	if len(b) >= size {
		return b
	}
	pad := byte(0)
	if len(b) > 0 && b[0]&0x80 != 0 {
		pad = 0xff
	}
	return append(bytes.Repeat([]byte{pad}, size-len(b)), b...)
}
