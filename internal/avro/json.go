package avro

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/hamba/avro/v2"
)

// ErrBody is wrapped by the error of a body that is not a value of the
// program's writer schema.
var ErrBody = errors.New("invalid Avro body")

// maxDepth bounds the nesting a body may make the program recurse into
// (a recursive schema lets a body nest without limit).
const maxDepth = 512

// reader is the state of one AppendJSON: the Avro reader over the body
// and a scratch buffer strings and bytes are read into (hamba's
// ReadBytes allocates them).
type reader struct {
	*avro.Reader
	size    int // of the body: no string or bytes can be longer
	scratch []byte
}

var readers = sync.Pool{New: func() any { return &reader{Reader: avro.NewReader(nil, 0)} }}

// maxEmptyItems bounds a block of items that take no bytes (nulls, empty
// records), which a body of a few bytes could otherwise claim by the
// billion.
const maxEmptyItems = 1 << 20

// checkBlock refuses a block of n items that the body cannot hold: every
// item but an empty one takes at least a byte.
// eachItem reads the blocks of an array or map, calling fn once per item
// (first tells the first), each block checked against what the body can
// hold before its items are read.
func (r *reader) eachItem(items *op, fn func(first bool) error) error {
	first := true
	for {
		n, _ := r.ReadBlockHeader()
		if r.Error != nil {
			return r.Error
		}
		if n == 0 {
			return nil
		}
		if err := r.checkBlock(n, items); err != nil {
			return err
		}
		for ; n > 0; n-- {
			if err := fn(first); err != nil {
				return err
			}
			first = false
		}
	}
}

func (r *reader) checkBlock(n int64, items *op) error {
	limit := int64(r.size)
	if items.wire == wNull || (items.wire == wRecord && len(items.fields) == 0) {
		limit = maxEmptyItems
	}
	if n < 0 || n > limit {
		return fmt.Errorf("a block of %d items in a body of %d bytes", n, r.size)
	}
	return nil
}

// bytes reads a string or bytes value into the scratch buffer, valid until
// the next call.
func (r *reader) bytes() []byte {
	n := r.ReadLong()
	if r.Error != nil {
		return nil
	}
	if n < 0 || n > int64(r.size) {
		r.ReportError("ReadBytes", "length "+strconv.FormatInt(n, 10)+" beyond the body")
		return nil
	}
	if cap(r.scratch) < int(n) {
		r.scratch = make([]byte, n, max(n, 256))
	}
	b := r.scratch[:n]
	r.Read(b)
	return b
}

// AppendJSON appends the JSON of body to dst. An error wraps ErrBody.
func (p *Program) AppendJSON(dst, body []byte) ([]byte, error) {
	r := readers.Get().(*reader)
	defer readers.Put(r)
	r.Error = nil
	r.Reset(body)
	r.size = len(body)
	n := len(dst)
	dst, err := appendValue(dst, r, p.root, 0)
	if err == nil && r.Error != nil {
		err = r.Error
	}
	if err == nil {
		r.Peek()
		if r.Error == nil {
			err = errors.New("bytes left after the value")
		} else if !errors.Is(r.Error, io.EOF) {
			err = r.Error
		}
	}
	r.Reset(nil)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errors.New("the body ends inside a value")
		}
		return dst[:n], fmt.Errorf("%w: %w", ErrBody, err)
	}
	return dst, nil
}

func appendValue(dst []byte, r *reader, o *op, depth int) ([]byte, error) {
	if depth > maxDepth {
		return dst, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	switch o.wire {
	case wNull:
		return append(dst, "null"...), nil
	case wBool:
		return strconv.AppendBool(dst, r.ReadBool()), nil
	case wInt:
		return appendLong(dst, int64(r.ReadInt()), o), nil
	case wLong:
		return appendLong(dst, r.ReadLong(), o), nil
	case wFloat:
		return appendFloat(dst, float64(r.ReadFloat()), 32), nil
	case wDouble:
		return appendFloat(dst, r.ReadDouble(), 64), nil
	case wString, wBytes:
		b := r.bytes()
		if r.Error != nil {
			return dst, r.Error
		}
		return appendBytes(dst, b, o)
	case wFixed:
		if o.size > r.size {
			return dst, errors.New("the body ends inside a fixed")
		}
		if cap(r.scratch) < o.size {
			r.scratch = make([]byte, o.size)
		}
		b := r.scratch[:o.size]
		r.Read(b)
		if r.Error != nil {
			return dst, r.Error
		}
		return appendBytes(dst, b, o)
	case wEnum:
		i := int(r.ReadInt())
		if r.Error != nil {
			return dst, r.Error
		}
		if i < 0 || i >= len(o.symbols) {
			return dst, fmt.Errorf("enum index %d out of range", i)
		}
		if o.symbols[i] == nil {
			return dst, fmt.Errorf("enum symbol %q is not in the reader schema, which has no default", o.enumErr[i])
		}
		return append(dst, o.symbols[i]...), nil
	case wArray:
		dst = append(dst, '[')
		err := r.eachItem(o.items, func(first bool) (err error) {
			if !first {
				dst = append(dst, ',')
			}
			if dst, err = appendValue(dst, r, o.items, depth+1); err != nil {
				return err
			}
			return r.Error
		})
		if err != nil {
			return dst, err
		}
		return append(dst, ']'), nil
	case wMap:
		dst = append(dst, '{')
		err := r.eachItem(o.items, func(first bool) (err error) {
			if !first {
				dst = append(dst, ',')
			}
			k := r.bytes()
			if r.Error != nil {
				return r.Error
			}
			if dst, err = appendString(dst, k); err != nil {
				return err
			}
			dst = append(dst, ':')
			dst, err = appendValue(dst, r, o.items, depth+1)
			return err
		})
		if err != nil {
			return dst, err
		}
		return append(dst, '}'), nil
	case wRecord:
		dst = append(dst, '{')
		first := true
		for i := range o.fields {
			f := &o.fields[i]
			if f.key == nil { // only the writer has it
				n := len(dst)
				var err error
				if dst, err = appendValue(dst, r, f.op, depth+1); err != nil {
					return dst, err
				}
				dst = dst[:n]
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.key...)
			var err error
			if dst, err = appendValue(dst, r, f.op, depth+1); err != nil {
				return dst, err
			}
		}
		for _, d := range o.defaults {
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, d...)
		}
		return append(dst, '}'), nil
	case wUnion:
		i := int(r.ReadLong())
		if r.Error != nil {
			return dst, r.Error
		}
		if i < 0 || i >= len(o.branches) {
			return dst, fmt.Errorf("union branch %d out of range", i)
		}
		if o.branches[i] == nil {
			return dst, errors.New(o.branchErr[i])
		}
		return appendValue(dst, r, o.branches[i], depth+1)
	}
	return dst, fmt.Errorf("unknown wire type %d", o.wire)
}

func appendLong(dst []byte, v int64, o *op) []byte {
	switch o.view {
	case vDate:
		return strconv.AppendQuote(dst, time.Unix(v*86400, 0).UTC().Format("2006-01-02T15:04:05Z"))
	case vTimeMillis:
		return appendClock(dst, time.Duration(v)*time.Millisecond, ".000")
	case vTimeMicros:
		return appendClock(dst, time.Duration(v)*time.Microsecond, ".000000")
	case vTimestampMillis:
		dst = append(dst, '"')
		dst = time.UnixMilli(v).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
		return append(dst, '"')
	case vTimestampMicros:
		dst = append(dst, '"')
		dst = time.UnixMicro(v).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000Z")
		return append(dst, '"')
	}
	return strconv.AppendInt(dst, v, 10)
}

func appendClock(dst []byte, d time.Duration, frac string) []byte {
	dst = append(dst, '"')
	dst = time.Unix(0, 0).UTC().Add(d).AppendFormat(dst, "15:04:05"+frac)
	return append(dst, '"')
}

func appendFloat(dst []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, bits)
}

func appendBytes(dst, b []byte, o *op) ([]byte, error) {
	switch o.view {
	case vDecimal:
		return appendDecimal(dst, b, o.scale), nil
	case vUUIDFixed:
		if len(b) != 16 {
			return dst, fmt.Errorf("uuid of %d bytes", len(b))
		}
		const hex = "0123456789abcdef"
		dst = append(dst, '"')
		for i, c := range b {
			if i == 4 || i == 6 || i == 8 || i == 10 {
				dst = append(dst, '-')
			}
			dst = append(dst, hex[c>>4], hex[c&15])
		}
		return append(dst, '"'), nil
	case vBase64:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"'), nil
	}
	return appendString(dst, b)
}

// appendDecimal writes the two's-complement big-endian unscaled value b
// with scale digits after the point.
func appendDecimal(dst, b []byte, scale int) []byte {
	var digits []byte
	neg := len(b) > 0 && b[0]&0x80 != 0
	if len(b) <= 8 {
		var v int64
		if neg {
			v = -1
		}
		for _, c := range b {
			v = v<<8 | int64(c)
		}
		if neg {
			digits = strconv.AppendUint(nil, uint64(-v), 10) // -MinInt64 wraps to its own magnitude as uint64
		} else {
			digits = strconv.AppendInt(nil, v, 10)
		}
	} else {
		n := new(big.Int).SetBytes(b)
		if neg {
			n.Sub(n, new(big.Int).Lsh(big.NewInt(1), uint(len(b)*8)))
			n.Neg(n)
		}
		digits = n.Append(nil, 10)
	}
	if neg {
		dst = append(dst, '-')
	}
	if scale <= 0 {
		return append(dst, digits...)
	}
	if len(digits) <= scale {
		dst = append(dst, '0', '.')
		for range scale - len(digits) {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[:len(digits)-scale]...)
	dst = append(dst, '.')
	return append(dst, digits[len(digits)-scale:]...)
}

// appendString writes s as a JSON string; s must be UTF-8, as Avro
// strings are.
func appendString(dst, s []byte) ([]byte, error) {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			_, size := utf8.DecodeRune(s[i:])
			if size == 1 {
				return dst, fmt.Errorf("string is not valid UTF-8 at byte %d", i)
			}
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), nil
}
