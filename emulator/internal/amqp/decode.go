package amqp

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 32

// maxZeroWidthElems bounds arrays whose elements take no bytes (null,
// true, uint0 …): their count is not limited by the input size.
const maxZeroWidthElems = 1 << 12

// Decode decodes one AMQP value from the start of b and returns it with the
// number of bytes it used.
func Decode(b []byte) (v any, n int, err error) {
	d := decoder{b: b}
	v, err = d.value(0)
	return v, d.off, err
}

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) fail(reason string) error {
	return &DecodeError{What: "value", Offset: d.off, Reason: reason}
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || len(d.b)-d.off < n {
		return nil, d.fail("truncated")
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p, nil
}

func (d *decoder) byte1() (byte, error) {
	p, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

func (d *decoder) value(depth int) (any, error) {
	if depth > maxDepth {
		return nil, d.fail("nesting too deep")
	}
	code, err := d.byte1()
	if err != nil {
		return nil, err
	}
	if code == codeDescribed {
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		if _, ok := desc.(Described); ok {
			return nil, d.fail("descriptor is itself described")
		}
		val, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		return Described{Descriptor: desc, Value: val}, nil
	}
	return d.body(code, depth)
}

// width returns the byte width of fixed-size constructors, or -1 for
// variable-width and compound ones.
func width(code byte) int {
	switch code {
	case codeNull, codeTrue, codeFalse, codeUint0, codeUlong0, codeList0:
		return 0
	case codeUbyte, codeByte, codeSmallUint, codeSmallUlong, codeSmallInt, codeSmallLong, codeBool:
		return 1
	case codeUshort, codeShort:
		return 2
	case codeUint, codeInt, codeFloat, codeChar, codeDecimal32:
		return 4
	case codeUlong, codeLong, codeDouble, codeTimestamp, codeDecimal64:
		return 8
	case codeDecimal128, codeUUID:
		return 16
	}
	return -1
}

// body decodes the value that follows constructor code.
func (d *decoder) body(code byte, depth int) (any, error) {
	if w := width(code); w >= 0 {
		p, err := d.need(w)
		if err != nil {
			return nil, err
		}
		return fixed(code, p)
	}
	switch code {
	case codeVbin8, codeStr8, codeSym8, codeVbin32, codeStr32, codeSym32:
		var n int
		if code&0xf0 == 0xa0 {
			c, err := d.byte1()
			if err != nil {
				return nil, err
			}
			n = int(c)
		} else {
			p, err := d.need(4)
			if err != nil {
				return nil, err
			}
			n = int(binary.BigEndian.Uint32(p))
		}
		p, err := d.need(n)
		if err != nil {
			return nil, err
		}
		switch code {
		case codeVbin8, codeVbin32:
			return append([]byte(nil), p...), nil
		case codeStr8, codeStr32:
			if !utf8.Valid(p) {
				return nil, d.fail("string is not valid UTF-8")
			}
			return string(p), nil
		default:
			return Symbol(p), nil
		}
	case codeList8, codeList32, codeMap8, codeMap32, codeArray8, codeArray32:
		return d.compound(code, depth)
	}
	d.off--
	return nil, d.fail("unknown constructor")
}

// fixed decodes a fixed-width value from exactly width(code) bytes.
func fixed(code byte, p []byte) (any, error) {
	switch code {
	case codeNull:
		return nil, nil
	case codeTrue:
		return true, nil
	case codeFalse:
		return false, nil
	case codeUint0:
		return uint32(0), nil
	case codeUlong0:
		return uint64(0), nil
	case codeList0:
		return List{}, nil
	case codeUbyte:
		return p[0], nil
	case codeByte:
		return int8(p[0]), nil
	case codeSmallUint:
		return uint32(p[0]), nil
	case codeSmallUlong:
		return uint64(p[0]), nil
	case codeSmallInt:
		return int32(int8(p[0])), nil
	case codeSmallLong:
		return int64(int8(p[0])), nil
	case codeBool:
		switch p[0] {
		case 0:
			return false, nil
		case 1:
			return true, nil
		}
		return nil, &DecodeError{What: "boolean", Reason: "byte is neither 0 nor 1"}
	case codeUshort:
		return binary.BigEndian.Uint16(p), nil
	case codeShort:
		return int16(binary.BigEndian.Uint16(p)), nil
	case codeUint:
		return binary.BigEndian.Uint32(p), nil
	case codeInt:
		return int32(binary.BigEndian.Uint32(p)), nil
	case codeFloat:
		return math.Float32frombits(binary.BigEndian.Uint32(p)), nil
	case codeChar:
		return Char(binary.BigEndian.Uint32(p)), nil
	case codeUlong:
		return binary.BigEndian.Uint64(p), nil
	case codeLong:
		return int64(binary.BigEndian.Uint64(p)), nil
	case codeDouble:
		return math.Float64frombits(binary.BigEndian.Uint64(p)), nil
	case codeTimestamp:
		return toTimestamp(int64(binary.BigEndian.Uint64(p))), nil
	case codeDecimal32, codeDecimal64, codeDecimal128:
		return Decimal{Bits: len(p) * 8, Bytes: append([]byte(nil), p...)}, nil
	case codeUUID:
		var u UUID
		copy(u[:], p)
		return u, nil
	}
	return nil, &DecodeError{What: "value", Reason: "unknown constructor"}
}

// compound decodes list, map and array bodies. The size field bounds the
// body; elements must fit inside it exactly.
func (d *decoder) compound(code byte, depth int) (any, error) {
	var size, count int
	if code == codeList8 || code == codeMap8 || code == codeArray8 {
		p, err := d.need(2)
		if err != nil {
			return nil, err
		}
		size, count = int(p[0]), int(p[1])
		if size < 1 {
			return nil, d.fail("compound size smaller than its count field")
		}
		size--
	} else {
		p, err := d.need(8)
		if err != nil {
			return nil, err
		}
		s, c := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
		if s < 4 {
			return nil, d.fail("compound size smaller than its count field")
		}
		if uint64(s)-4 > uint64(len(d.b)-d.off) {
			return nil, d.fail("truncated")
		}
		size, count = int(s-4), int(c)
	}
	body, err := d.need(size)
	if err != nil {
		return nil, err
	}
	base := d.off - size
	sub := decoder{b: body}
	var out any
	switch code {
	case codeList8, codeList32:
		out, err = sub.listItems(count, depth)
	case codeMap8, codeMap32:
		out, err = sub.mapItems(count, depth)
	default:
		out, err = sub.arrayItems(count, depth)
	}
	if err != nil {
		if de, ok := err.(*DecodeError); ok {
			de.Offset += base
		}
		return nil, err
	}
	if sub.off != len(body) {
		d.off = base + sub.off
		return nil, d.fail("compound size does not match its elements")
	}
	return out, nil
}

func (d *decoder) listItems(count, depth int) (List, error) {
	if count > len(d.b) {
		return nil, d.fail("list count exceeds its size")
	}
	l := make(List, 0, count)
	for i := 0; i < count; i++ {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		l = append(l, v)
	}
	return l, nil
}

func (d *decoder) mapItems(count, depth int) (Map, error) {
	if count%2 != 0 {
		return nil, d.fail("map has an odd element count")
	}
	if count > len(d.b) {
		return nil, d.fail("map count exceeds its size")
	}
	m := make(Map, 0, count/2)
	for i := 0; i < count; i += 2 {
		k, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		m = append(m, KeyValue{Key: k, Value: v})
	}
	return m, nil
}

func (d *decoder) arrayItems(count, depth int) (Array, error) {
	code, err := d.byte1()
	if err != nil {
		return Array{}, err
	}
	var desc any
	if code == codeDescribed {
		if desc, err = d.value(depth + 1); err != nil {
			return Array{}, err
		}
		if _, ok := desc.(Described); ok {
			return Array{}, d.fail("descriptor is itself described")
		}
		if code, err = d.byte1(); err != nil {
			return Array{}, err
		}
		if code == codeDescribed {
			return Array{}, d.fail("array element constructor is described twice")
		}
	}
	if w := width(code); w == 0 && count > maxZeroWidthElems || w != 0 && count > len(d.b) {
		return Array{}, d.fail("array count exceeds its size")
	}
	a := Array{Constructor: code, Elems: make([]any, 0, count)}
	for i := 0; i < count; i++ {
		v, err := d.body(code, depth+1)
		if err != nil {
			return Array{}, err
		}
		if desc != nil {
			v = Described{Descriptor: desc, Value: v}
		}
		a.Elems = append(a.Elems, v)
	}
	return a, nil
}

// Skip returns the encoded length of the value at the start of b without
// building it; it validates sizes but not contents.
func Skip(b []byte) (int, error) {
	d := decoder{b: b}
	if err := d.skip(0); err != nil {
		return 0, err
	}
	return d.off, nil
}

func (d *decoder) skip(depth int) error {
	if depth > maxDepth {
		return d.fail("nesting too deep")
	}
	code, err := d.byte1()
	if err != nil {
		return err
	}
	if code == codeDescribed {
		if err := d.skip(depth + 1); err != nil {
			return err
		}
		return d.skip(depth + 1)
	}
	if w := width(code); w >= 0 {
		_, err := d.need(w)
		return err
	}
	var n int
	switch code {
	case codeVbin8, codeStr8, codeSym8, codeList8, codeMap8, codeArray8:
		c, err := d.byte1()
		if err != nil {
			return err
		}
		n = int(c)
	case codeVbin32, codeStr32, codeSym32, codeList32, codeMap32, codeArray32:
		p, err := d.need(4)
		if err != nil {
			return err
		}
		if uint64(binary.BigEndian.Uint32(p)) > uint64(len(d.b)) {
			return d.fail("truncated")
		}
		n = int(binary.BigEndian.Uint32(p))
	default:
		d.off--
		return d.fail("unknown constructor")
	}
	_, err = d.need(n)
	return err
}
