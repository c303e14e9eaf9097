package amqp

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Append encodes v (one of the Go types listed in the package comment, plus
// int, []string and []Symbol, which encode as arrays) and appends it to dst.
// It picks the smallest encoding for each value.
func Append(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, codeNull), nil
	case bool:
		return AppendBool(dst, v), nil
	case uint8:
		return append(dst, codeUbyte, v), nil
	case uint16:
		return binary.BigEndian.AppendUint16(append(dst, codeUshort), v), nil
	case uint32:
		return AppendUint(dst, v), nil
	case uint64:
		return AppendUlong(dst, v), nil
	case int8:
		return append(dst, codeByte, byte(v)), nil
	case int16:
		return binary.BigEndian.AppendUint16(append(dst, codeShort), uint16(v)), nil
	case int32:
		return AppendInt(dst, v), nil
	case int64:
		return AppendLong(dst, v), nil
	case int:
		return AppendLong(dst, int64(v)), nil
	case float32:
		return binary.BigEndian.AppendUint32(append(dst, codeFloat), math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(append(dst, codeDouble), math.Float64bits(v)), nil
	case Char:
		return binary.BigEndian.AppendUint32(append(dst, codeChar), uint32(v)), nil
	case time.Time:
		return AppendTimestamp(dst, v), nil
	case UUID:
		return append(append(dst, codeUUID), v[:]...), nil
	case []byte:
		return AppendBinary(dst, v), nil
	case string:
		return AppendString(dst, v), nil
	case Symbol:
		return AppendSymbol(dst, v), nil
	case Decimal:
		code := map[int]byte{32: codeDecimal32, 64: codeDecimal64, 128: codeDecimal128}[v.Bits]
		if code == 0 || len(v.Bytes)*8 != v.Bits {
			return dst, fmt.Errorf("amqp: encode decimal: %d bits with %d bytes", v.Bits, len(v.Bytes))
		}
		return append(append(dst, code), v.Bytes...), nil
	case List:
		return appendList(dst, v)
	case []any:
		return appendList(dst, List(v))
	case Map:
		return appendMap(dst, v)
	case Array:
		return appendArray(dst, v)
	case []string:
		a := Array{Constructor: codeStr8, Elems: make([]any, len(v))}
		for i, s := range v {
			a.Elems[i] = s
		}
		return appendArray(dst, a)
	case []Symbol:
		return AppendSymbolArray(dst, v), nil
	case Described:
		dst = append(dst, codeDescribed)
		dst, err := Append(dst, v.Descriptor)
		if err != nil {
			return dst, err
		}
		return Append(dst, v.Value)
	case Marshaler:
		return v.AppendAMQP(dst)
	}
	return dst, fmt.Errorf("amqp: encode: unsupported Go type %T", v)
}

// Marshaler is implemented by composite types (performatives, termini,
// outcomes) that know their own described encoding.
type Marshaler interface {
	AppendAMQP(dst []byte) ([]byte, error)
}

// AppendBool appends a boolean using the zero-width true/false forms.
func AppendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, codeTrue)
	}
	return append(dst, codeFalse)
}

// AppendUint appends a uint, using uint0 or smalluint when it fits.
func AppendUint(dst []byte, v uint32) []byte {
	switch {
	case v == 0:
		return append(dst, codeUint0)
	case v < 256:
		return append(dst, codeSmallUint, byte(v))
	}
	return binary.BigEndian.AppendUint32(append(dst, codeUint), v)
}

// AppendUlong appends a ulong, using ulong0 or smallulong when it fits.
func AppendUlong(dst []byte, v uint64) []byte {
	switch {
	case v == 0:
		return append(dst, codeUlong0)
	case v < 256:
		return append(dst, codeSmallUlong, byte(v))
	}
	return binary.BigEndian.AppendUint64(append(dst, codeUlong), v)
}

// AppendInt appends an int, using smallint when it fits.
func AppendInt(dst []byte, v int32) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, codeSmallInt, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint32(append(dst, codeInt), uint32(v))
}

// AppendLong appends a long, using smalllong when it fits.
func AppendLong(dst []byte, v int64) []byte {
	if v >= math.MinInt8 && v <= math.MaxInt8 {
		return append(dst, codeSmallLong, byte(int8(v)))
	}
	return binary.BigEndian.AppendUint64(append(dst, codeLong), uint64(v))
}

// AppendTimestamp appends t as milliseconds since the Unix epoch.
func AppendTimestamp(dst []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(append(dst, codeTimestamp), uint64(t.UnixMilli()))
}

func appendVar(dst []byte, code8, code32 byte, p []byte, s string) []byte {
	n := len(p) + len(s)
	if n < 256 {
		dst = append(dst, code8, byte(n))
	} else {
		dst = binary.BigEndian.AppendUint32(append(dst, code32), uint32(n))
	}
	dst = append(dst, p...)
	return append(dst, s...)
}

// AppendBinary appends a vbin8 or vbin32.
func AppendBinary(dst []byte, p []byte) []byte { return appendVar(dst, codeVbin8, codeVbin32, p, "") }

// AppendString appends a str8 or str32.
func AppendString(dst []byte, s string) []byte { return appendVar(dst, codeStr8, codeStr32, nil, s) }

// AppendSymbol appends a sym8 or sym32.
func AppendSymbol(dst []byte, s Symbol) []byte {
	return appendVar(dst, codeSym8, codeSym32, nil, string(s))
}

// AppendSymbolArray appends an array of symbols (capabilities, mechanisms).
func AppendSymbolArray(dst []byte, syms []Symbol) []byte {
	a := Array{Constructor: codeSym8, Elems: make([]any, len(syms))}
	for i, s := range syms {
		a.Elems[i] = s
	}
	dst, _ = appendArray(dst, a) // symbols always encode
	return dst
}

// AppendDescriptor appends the described-type marker and a ulong descriptor.
func AppendDescriptor(dst []byte, code uint64) []byte {
	return AppendUlong(append(dst, codeDescribed), code)
}

// compoundStart reserves a list32/map32/array32 header and returns the
// offset of the size field; compoundEnd patches it.
func compoundStart(dst []byte, code byte) ([]byte, int) {
	dst = append(dst, code)
	at := len(dst)
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), at
}

// compoundEnd patches a header written by compoundStart, shrinking it to the
// 8-bit form when the body is small enough.
func compoundEnd(dst []byte, at int, count int) []byte {
	body := len(dst) - at - 8
	if body+1 < 256 && count < 256 {
		dst[at-1] -= 0x10 // list32→list8, map32→map8, array32→array8
		dst[at] = byte(body + 1)
		dst[at+1] = byte(count)
		copy(dst[at+2:], dst[at+8:])
		return dst[:len(dst)-6]
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(body+4))
	binary.BigEndian.PutUint32(dst[at+4:], uint32(count))
	return dst
}

func appendList(dst []byte, l List) ([]byte, error) {
	if len(l) == 0 {
		return append(dst, codeList0), nil
	}
	dst, at := compoundStart(dst, codeList32)
	var err error
	for _, v := range l {
		if dst, err = Append(dst, v); err != nil {
			return dst, err
		}
	}
	return compoundEnd(dst, at, len(l)), nil
}

func appendMap(dst []byte, m Map) ([]byte, error) {
	dst, at := compoundStart(dst, codeMap32)
	var err error
	for _, kv := range m {
		if dst, err = Append(dst, kv.Key); err != nil {
			return dst, err
		}
		if dst, err = Append(dst, kv.Value); err != nil {
			return dst, err
		}
	}
	return compoundEnd(dst, at, 2*len(m)), nil
}

// appendArray writes all elements with one constructor. Variable-width
// elements use the 32-bit form when any element needs it.
func appendArray(dst []byte, a Array) ([]byte, error) {
	dst, at := compoundStart(dst, codeArray32)
	code := a.Constructor
	var desc any
	if len(a.Elems) > 0 {
		first := a.Elems[0]
		if d, ok := first.(Described); ok {
			desc, first = d.Descriptor, d.Value
		}
		var err error
		if code, err = arrayCode(first, a.Elems, desc != nil); err != nil {
			return dst, err
		}
	} else if code == 0 {
		code = codeSym8
	}
	if desc != nil {
		dst = append(dst, codeDescribed)
		var err error
		if dst, err = Append(dst, desc); err != nil {
			return dst, err
		}
	}
	dst = append(dst, code)
	for _, e := range a.Elems {
		if d, ok := e.(Described); ok {
			if desc == nil || !keyEqual(d.Descriptor, desc) {
				return dst, fmt.Errorf("amqp: encode array: elements have different descriptors")
			}
			e = d.Value
		} else if desc != nil {
			return dst, fmt.Errorf("amqp: encode array: mixed described and plain elements")
		}
		var err error
		if dst, err = appendArrayElem(dst, code, e); err != nil {
			return dst, err
		}
	}
	return compoundEnd(dst, at, len(a.Elems)), nil
}

// arrayCode picks the single constructor used for every element.
func arrayCode(first any, elems []any, described bool) (byte, error) {
	big := false
	for _, e := range elems {
		if d, ok := e.(Described); ok && described {
			e = d.Value
		}
		switch e := e.(type) {
		case string:
			big = big || len(e) > 255
		case Symbol:
			big = big || len(e) > 255
		case []byte:
			big = big || len(e) > 255
		}
	}
	switch first.(type) {
	case nil:
		return codeNull, nil
	case bool:
		return codeBool, nil
	case uint8:
		return codeUbyte, nil
	case uint16:
		return codeUshort, nil
	case uint32:
		return codeUint, nil
	case uint64:
		return codeUlong, nil
	case int8:
		return codeByte, nil
	case int16:
		return codeShort, nil
	case int32:
		return codeInt, nil
	case int64:
		return codeLong, nil
	case float32:
		return codeFloat, nil
	case float64:
		return codeDouble, nil
	case Char:
		return codeChar, nil
	case time.Time:
		return codeTimestamp, nil
	case UUID:
		return codeUUID, nil
	case string:
		if big {
			return codeStr32, nil
		}
		return codeStr8, nil
	case Symbol:
		if big {
			return codeSym32, nil
		}
		return codeSym8, nil
	case []byte:
		if big {
			return codeVbin32, nil
		}
		return codeVbin8, nil
	case List:
		return codeList32, nil
	case Map:
		return codeMap32, nil
	}
	return 0, fmt.Errorf("amqp: encode array: unsupported element type %T", first)
}

// appendArrayElem writes one array element without its constructor.
func appendArrayElem(dst []byte, code byte, e any) ([]byte, error) {
	var ok bool
	switch code {
	case codeNull:
		ok = e == nil
	case codeBool:
		var v bool
		if v, ok = e.(bool); ok {
			b := byte(0)
			if v {
				b = 1
			}
			dst = append(dst, b)
		}
	case codeUbyte:
		var v uint8
		if v, ok = e.(uint8); ok {
			dst = append(dst, v)
		}
	case codeByte:
		var v int8
		if v, ok = e.(int8); ok {
			dst = append(dst, byte(v))
		}
	case codeUshort:
		var v uint16
		if v, ok = e.(uint16); ok {
			dst = binary.BigEndian.AppendUint16(dst, v)
		}
	case codeShort:
		var v int16
		if v, ok = e.(int16); ok {
			dst = binary.BigEndian.AppendUint16(dst, uint16(v))
		}
	case codeUint:
		var v uint32
		if v, ok = e.(uint32); ok {
			dst = binary.BigEndian.AppendUint32(dst, v)
		}
	case codeInt:
		var v int32
		if v, ok = e.(int32); ok {
			dst = binary.BigEndian.AppendUint32(dst, uint32(v))
		}
	case codeChar:
		var v Char
		if v, ok = e.(Char); ok {
			dst = binary.BigEndian.AppendUint32(dst, uint32(v))
		}
	case codeFloat:
		var v float32
		if v, ok = e.(float32); ok {
			dst = binary.BigEndian.AppendUint32(dst, math.Float32bits(v))
		}
	case codeUlong:
		var v uint64
		if v, ok = e.(uint64); ok {
			dst = binary.BigEndian.AppendUint64(dst, v)
		}
	case codeLong:
		var v int64
		if v, ok = e.(int64); ok {
			dst = binary.BigEndian.AppendUint64(dst, uint64(v))
		}
	case codeDouble:
		var v float64
		if v, ok = e.(float64); ok {
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(v))
		}
	case codeTimestamp:
		var v time.Time
		if v, ok = e.(time.Time); ok {
			dst = binary.BigEndian.AppendUint64(dst, uint64(v.UnixMilli()))
		}
	case codeUUID:
		var v UUID
		if v, ok = e.(UUID); ok {
			dst = append(dst, v[:]...)
		}
	case codeStr8, codeStr32, codeSym8, codeSym32, codeVbin8, codeVbin32:
		var p []byte
		switch v := e.(type) {
		case string:
			ok, p = code == codeStr8 || code == codeStr32, []byte(v)
		case Symbol:
			ok, p = code == codeSym8 || code == codeSym32, []byte(v)
		case []byte:
			ok, p = code == codeVbin8 || code == codeVbin32, v
		}
		if ok {
			if code&0xf0 == 0xa0 {
				if len(p) > 255 {
					return dst, fmt.Errorf("amqp: encode array: element of %d bytes in an 8-bit array", len(p))
				}
				dst = append(dst, byte(len(p)))
			} else {
				dst = binary.BigEndian.AppendUint32(dst, uint32(len(p)))
			}
			dst = append(dst, p...)
		}
	case codeList32, codeMap32:
		// Encode with a constructor, then drop it; force the 32-bit form
		// so every element shares the array's constructor.
		var err error
		start := len(dst)
		switch v := e.(type) {
		case List:
			ok = code == codeList32
			if ok {
				dst, err = appendCompound32(dst, codeList32, v, nil)
			}
		case Map:
			ok = code == codeMap32
			if ok {
				dst, err = appendCompound32(dst, codeMap32, nil, v)
			}
		}
		if err != nil {
			return dst, err
		}
		if ok {
			dst = append(dst[:start], dst[start+1:]...)
		}
	default:
		return dst, fmt.Errorf("amqp: encode array: unsupported constructor %#x", code)
	}
	if !ok {
		return dst, fmt.Errorf("amqp: encode array: element %T does not match constructor %#x", e, code)
	}
	return dst, nil
}

func appendCompound32(dst []byte, code byte, l List, m Map) ([]byte, error) {
	dst = append(dst, code, 0, 0, 0, 0, 0, 0, 0, 0)
	at := len(dst) - 8
	var err error
	count := len(l)
	for _, v := range l {
		if dst, err = Append(dst, v); err != nil {
			return dst, err
		}
	}
	for _, kv := range m {
		if dst, err = Append(dst, kv.Key); err != nil {
			return dst, err
		}
		if dst, err = Append(dst, kv.Value); err != nil {
			return dst, err
		}
		count += 2
	}
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	binary.BigEndian.PutUint32(dst[at+4:], uint32(count))
	return dst, nil
}
