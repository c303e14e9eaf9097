package mapping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/ehsink/ehsink/sinks"
)

// Errors wrapped by [*ColumnError] for values that are absent.
var (
	// ErrMissing: the source has no value (a JSON path not in the body, an
	// absent property) and the column is not nullable.
	ErrMissing = errors.New("missing value")
	// ErrNull: the value is JSON null (or a nil property) and the column is
	// not nullable.
	ErrNull = errors.New("null value in a non-nullable column")
)

// ColumnError is the failure of one column of one event.
type ColumnError struct {
	// Column is the column's name.
	Column string
	// Err says why, such as `"abc" is not a number`.
	Err error
}

// Error returns `column "NAME": why`.
func (e *ColumnError) Error() string {
	return "column " + strconv.Quote(e.Column) + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *ColumnError) Unwrap() error { return e.Err }

// Mapper turns events into rows by a compiled mapping. It is safe for
// concurrent use by several writers.
type Mapper struct {
	cols     Columns
	root     *node // trie of the JSON paths; nil when the body is not read as JSON
	needScan bool  // the body must be parsed (JSON paths, or @body / $ as json)
	explode  Path
	pool     sync.Pool
}

// Compile validates cols and builds a Mapper. The mapper keeps its own copy
// of the columns.
func Compile(cols Columns) (*Mapper, error) { return CompileWith(cols, Options{}) }

// CompileWith is Compile with options (an exploded array).
func CompileWith(cols Columns, o Options) (*Mapper, error) {
	if err := errors.Join(cols.Validate(), o.Validate(cols)); err != nil {
		return nil, err
	}
	m := &Mapper{cols: append(Columns(nil), cols...), root: &node{}, explode: o.Explode}
	colRoot := m.root
	if m.exploded() {
		// The columns' paths start at each element of the array.
		colRoot = &node{}
		m.root.at(o.Explode.Steps()).explode = colRoot
		m.needScan = true
	}
	for i, c := range m.cols {
		switch {
		case c.From.Kind == SourceJSON:
			colRoot.add(c.From.Path, i)
			m.needScan = true
		case c.From.Kind == SourceBody && c.Type.Kind == KindJSON:
			m.needScan = true // validate the body
		}
	}
	m.pool.New = func() any { return &scanner{} }
	return m, nil
}

func (m *Mapper) exploded() bool { return m.explode.IsSet() }

// Explode returns the exploded path, unset for a mapper without one.
func (m *Mapper) Explode() Path { return m.explode }

// Columns returns the mapper's columns. The caller must not modify them.
func (m *Mapper) Columns() Columns { return m.cols }

// Map converts ev into row, which must have one element per column; each
// element is set to the column's Go value (see the package documentation)
// or nil. Map parses the body at most once and copies what it keeps, so
// row does not alias ev (the event's metadata strings, immutable, are kept
// without a copy). Rows may share a string or time.Time value, which
// cannot be modified through its interface; a []byte or json.RawMessage
// is never shared. On failure it returns [ErrInvalidJSON] (wrapped)
// or the [*ColumnError] of each failing column, joined; row's contents are
// then unspecified.
//
// A mapper with Explode makes several rows of an event: use [Mapper.Rows].
func (m *Mapper) Map(ev *sinks.Event, row []any) error {
	if m.exploded() {
		return fmt.Errorf("mapping: the mapping explodes %s: use Rows", m.explode)
	}
	r, err := m.Rows(ev)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Map(0, row)
}

// mapScanned converts the values of a scanned event (or element) into row.
func (m *Mapper) mapScanned(ev *sinks.Event, row []any, sc *scanner) error {
	if len(row) != len(m.cols) {
		return fmt.Errorf("mapping: row has %d values for %d columns", len(row), len(m.cols))
	}
	var errs []error
	for i := range m.cols {
		c := &m.cols[i]
		v, err := m.value(c, i, ev, sc)
		if err == nil && v == nil && !c.Nullable {
			err = ErrNull
		}
		if err != nil {
			errs = append(errs, &ColumnError{Column: c.Name, Err: err})
			v = nil
		}
		row[i] = v
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// scalar is a source value on its way to a column type.
type scalar struct {
	kind     byte // jString, jNumber, jTrue/jFalse (bool), jObject (raw JSON), 'i' int, 'T' time, 'x' bytes
	text     []byte
	raw      []byte // the JSON text of a value from the body
	i        int64
	t        time.Time
	fromJSON bool
}

const (
	sInt   byte = 'i'
	sTime  byte = 'T'
	sBytes byte = 'x'
)

// bytesOf views s as bytes without copying; the result must not be modified.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func (m *Mapper) value(c *Column, i int, ev *sinks.Event, sc *scanner) (any, error) {
	var s scalar
	switch c.From.Kind {
	case SourceJSON:
		sp := sc.spans[i]
		switch sp.kind {
		case jMissing:
			if !c.Nullable {
				return nil, fmt.Errorf("%w at %s", ErrMissing, c.From)
			}
			return nil, nil
		case jNull:
			return nil, nil
		}
		kind, raw := sp.kind, ev.Body[sp.start:sp.end]
		text := raw
		switch kind {
		case jString:
			text = raw[1 : len(raw)-1]
			if sp.escaped {
				sc.buf = unescape(sc.buf[:0], text)
				text = sc.buf
			}
		case jArray:
			kind = jObject
		}
		// The common conversions, without convert's detour.
		switch {
		case c.Type.Kind == KindString && kind != jTrue && kind != jFalse:
			// Text from the body is valid UTF-8: the scan checked it.
			return sc.boxBytes(i, text), nil
		case c.Type.Kind == KindTimestamp && kind == jString:
			if t, ok := parseRFC3339(text, c.Type.Unit); ok {
				return sc.boxTime(i, t), nil
			}
		}
		s = scalar{kind: kind, text: text, raw: raw, fromJSON: true}
	case SourcePartition:
		if c.Type.Kind == KindString {
			return sc.shareString(i, ev.Partition)
		}
		s = scalar{kind: jString, text: bytesOf(ev.Partition)}
	case SourceSequenceNumber:
		s = scalar{kind: sInt, i: ev.SequenceNumber}
	case SourceOffset:
		if c.Type.Kind == KindString {
			return sc.shareString(i, ev.Offset)
		}
		s = scalar{kind: jString, text: bytesOf(ev.Offset)}
	case SourceEnqueuedTime:
		if c.Type.Kind == KindTimestamp {
			return sc.boxTime(i, ev.EnqueuedTime.UTC().Truncate(c.Type.Unit.duration())), nil
		}
		s = scalar{kind: sTime, t: ev.EnqueuedTime}
	case SourcePartitionKey:
		if ev.PartitionKey == nil {
			return nil, nil
		}
		if c.Type.Kind == KindString {
			return sc.shareString(i, *ev.PartitionKey)
		}
		s = scalar{kind: jString, text: bytesOf(*ev.PartitionKey)}
	case SourceContentType:
		if ev.ContentType == nil {
			return nil, nil
		}
		if c.Type.Kind == KindString {
			return sc.shareString(i, *ev.ContentType)
		}
		s = scalar{kind: jString, text: bytesOf(*ev.ContentType)}
	case SourceProperty:
		p, ok := ev.Properties[c.From.Property]
		if !ok {
			if !c.Nullable {
				return nil, fmt.Errorf("%w at %s", ErrMissing, c.From)
			}
			return nil, nil
		}
		if p == nil {
			return nil, nil
		}
		s = propertyScalar(p)
	case SourceBody:
		s = scalar{kind: sBytes, text: ev.Body, raw: ev.Body}
	case SourceIndex:
		s = scalar{kind: sInt, i: int64(sc.index)}
	default:
		return nil, fmt.Errorf("invalid source")
	}
	return convert(c.Type, &s, sc)
}

func propertyScalar(p any) scalar {
	switch v := p.(type) {
	case string:
		return scalar{kind: jString, text: bytesOf(v)}
	case bool:
		if v {
			return scalar{kind: jTrue}
		}
		return scalar{kind: jFalse}
	case int:
		return scalar{kind: sInt, i: int64(v)}
	case int8:
		return scalar{kind: sInt, i: int64(v)}
	case int16:
		return scalar{kind: sInt, i: int64(v)}
	case int32:
		return scalar{kind: sInt, i: int64(v)}
	case int64:
		return scalar{kind: sInt, i: v}
	case uint8:
		return scalar{kind: sInt, i: int64(v)}
	case uint16:
		return scalar{kind: sInt, i: int64(v)}
	case uint32:
		return scalar{kind: sInt, i: int64(v)}
	case uint64:
		if v <= math.MaxInt64 {
			return scalar{kind: sInt, i: int64(v)}
		}
		return scalar{kind: jNumber, text: strconv.AppendUint(nil, v, 10)}
	case float32:
		return scalar{kind: jNumber, text: strconv.AppendFloat(nil, float64(v), 'g', -1, 32)}
	case float64:
		return scalar{kind: jNumber, text: strconv.AppendFloat(nil, v, 'g', -1, 64)}
	case time.Time:
		return scalar{kind: sTime, t: v}
	case []byte:
		return scalar{kind: sBytes, text: v}
	default:
		return scalar{kind: jString, text: []byte(fmt.Sprint(v))}
	}
}

// duration returns the unit as a duration, for time.Truncate.
func (u TimeUnit) duration() time.Duration {
	if u == Millis {
		return time.Millisecond
	}
	return time.Microsecond
}

// boxed holds the last values of a column and their boxed forms, which the
// next rows with the same value share: an interface holding a string or a
// time.Time cannot be modified through, so rows may share one, and a
// column whose values repeat (a partition, a currency, the enqueued time
// of a batch) then costs no allocation.
type boxed struct {
	strs [boxedStrings]boxedString
	next int // the entry of strs to replace
	t    time.Time
	tv   any
}

type boxedString struct {
	s string
	v any
}

const (
	// boxedStrings is the number of strings kept per column: enough for a
	// column of a few values that alternate, few enough that a column of
	// unique values costs little to look up.
	boxedStrings = 4
	// maxBoxed bounds the length of the strings kept, so that what the
	// pooled scanners hold stays small.
	maxBoxed = 64
)

// lookup returns the boxed form of str if the column has it, else nil.
func (c *boxed) lookup(str string) any {
	for k := range c.strs {
		// Unique values (IDs) tend to differ last: compare that byte
		// first.
		if e := &c.strs[k]; len(e.s) == len(str) && e.v != nil && (len(str) == 0 || e.s[len(str)-1] == str[len(str)-1]) && e.s == str {
			return e.v
		}
	}
	return nil
}

// keep adds str to the column's values and returns it boxed.
func (c *boxed) keep(str string) any {
	if len(str) > maxBoxed {
		return str
	}
	e := &c.strs[c.next]
	c.next = (c.next + 1) % boxedStrings
	e.s, e.v = str, str
	return e.v
}

// boxBytes returns b (valid UTF-8) as a boxed string of its own.
func (sc *scanner) boxBytes(i int, b []byte) any {
	c := &sc.boxes[i]
	if v := c.lookup(unsafe.String(unsafe.SliceData(b), len(b))); v != nil {
		return v
	}
	return c.keep(string(b))
}

// shareString returns str boxed, without a copy: a Go string is immutable
// (an event's Partition and Offset are), so the row does not alias memory
// the event may reuse.
func (sc *scanner) shareString(i int, str string) (any, error) {
	c := &sc.boxes[i]
	if v := c.lookup(str); v != nil {
		return v, nil
	}
	if !utf8.ValidString(str) {
		return nil, errors.New("value is not valid UTF-8")
	}
	return c.keep(str), nil
}

// boxTime returns t boxed.
func (sc *scanner) boxTime(i int, t time.Time) any {
	c := &sc.boxes[i]
	if c.tv != nil && c.t == t {
		return c.tv
	}
	c.t, c.tv = t, t
	return c.tv
}

// quoteValue renders a value for an error message, shortened.
func quoteValue(b []byte) string {
	const limit = 40
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "..."
	}
	return strconv.Quote(string(b))
}

func (s *scalar) describe() string {
	switch s.kind {
	case jString, jNumber, jObject:
		if s.fromJSON && s.kind != jString {
			return quoteValue(s.text)
		}
		return quoteValue(s.text)
	case jTrue:
		return "true"
	case jFalse:
		return "false"
	case sInt:
		return strconv.FormatInt(s.i, 10)
	case sTime:
		return s.t.UTC().Format(time.RFC3339Nano)
	case sBytes:
		return fmt.Sprintf("%d bytes", len(s.text))
	}
	return "value"
}

func convert(t Type, s *scalar, sc *scanner) (any, error) {
	switch t.Kind {
	case KindString:
		switch s.kind {
		case jString, jNumber, jObject, sBytes:
			if !utf8.Valid(s.text) {
				return nil, errors.New("value is not valid UTF-8")
			}
			return string(s.text), nil
		case jTrue:
			return "true", nil
		case jFalse:
			return "false", nil
		case sInt:
			return strconv.FormatInt(s.i, 10), nil
		case sTime:
			return s.t.UTC().Format(time.RFC3339Nano), nil
		}
	case KindInt64, KindInt32:
		var n int64
		switch s.kind {
		case jString, jNumber:
			v, ok := parseInt(s.text)
			if !ok {
				if _, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(s.text), len(s.text)), 64); err == nil && len(s.text) > 0 {
					return nil, fmt.Errorf("%s is not an integer", quoteValue(s.text))
				}
				return nil, fmt.Errorf("%s is not a number", quoteValue(s.text))
			}
			n = v
		case sInt:
			n = s.i
		default:
			return nil, fmt.Errorf("%s is not an integer", s.describe())
		}
		if t.Kind == KindInt32 {
			if n < math.MinInt32 || n > math.MaxInt32 {
				return nil, fmt.Errorf("%d is out of range for int32", n)
			}
			return int32(n), nil
		}
		return n, nil
	case KindDouble:
		switch s.kind {
		case jString, jNumber:
			f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(s.text), len(s.text)), 64)
			if err != nil || len(s.text) == 0 {
				return nil, fmt.Errorf("%s is not a number", quoteValue(s.text))
			}
			return f, nil
		case sInt:
			return float64(s.i), nil
		}
		return nil, fmt.Errorf("%s is not a number", s.describe())
	case KindDecimal:
		switch s.kind {
		case jString, jNumber:
			d, dig, err := parseDecimal(s.text, t, sc.dig)
			sc.dig = dig
			if err != nil {
				if errors.Is(err, errPrecision) {
					return nil, fmt.Errorf("%s does not fit %s", quoteValue(s.text), t)
				}
				return nil, fmt.Errorf("%s is not a number", quoteValue(s.text))
			}
			return d, nil
		case sInt:
			sc.num = strconv.AppendInt(sc.num[:0], s.i, 10)
			d, dig, err := parseDecimal(sc.num, t, sc.dig)
			sc.dig = dig
			if err != nil {
				return nil, fmt.Errorf("%d does not fit %s", s.i, t)
			}
			return d, nil
		}
		return nil, fmt.Errorf("%s is not a number", s.describe())
	case KindBoolean:
		switch s.kind {
		case jTrue:
			return true, nil
		case jFalse:
			return false, nil
		case jString:
			switch string(s.text) {
			case "true":
				return true, nil
			case "false":
				return false, nil
			}
		}
		return nil, fmt.Errorf("%s is not a boolean", s.describe())
	case KindTimestamp:
		var ts time.Time
		switch s.kind {
		case jString:
			if v, ok := parseRFC3339(s.text, t.Unit); ok {
				return v, nil
			}
			v, err := time.Parse(time.RFC3339Nano, unsafe.String(unsafe.SliceData(s.text), len(s.text)))
			if err != nil {
				return nil, fmt.Errorf("%s is not an RFC 3339 timestamp", quoteValue(s.text))
			}
			ts = v
		case jNumber:
			ms, ok := parseInt(s.text)
			if !ok {
				return nil, fmt.Errorf("%s is not a timestamp (numbers are Unix milliseconds)", quoteValue(s.text))
			}
			ts = time.UnixMilli(ms)
		case sInt:
			ts = time.UnixMilli(s.i)
		case sTime:
			ts = s.t
		default:
			return nil, fmt.Errorf("%s is not a timestamp", s.describe())
		}
		return ts.UTC().Truncate(t.Unit.duration()), nil
	case KindJSON:
		switch {
		case s.fromJSON:
			return json.RawMessage(append([]byte(nil), s.raw...)), nil
		case s.kind == sBytes && s.raw != nil: // the body, validated by the scan
			return json.RawMessage(append([]byte(nil), s.raw...)), nil
		case s.kind == jString:
			if !utf8.Valid(s.text) {
				return nil, errors.New("value is not valid UTF-8")
			}
			b, _ := json.Marshal(string(s.text))
			return json.RawMessage(b), nil
		case s.kind == jNumber:
			return json.RawMessage(append([]byte(nil), s.text...)), nil
		case s.kind == jTrue:
			return json.RawMessage("true"), nil
		case s.kind == jFalse:
			return json.RawMessage("false"), nil
		case s.kind == sInt:
			return json.RawMessage(strconv.AppendInt(nil, s.i, 10)), nil
		case s.kind == sTime:
			return json.RawMessage(strconv.AppendQuote(nil, s.t.UTC().Format(time.RFC3339Nano))), nil
		}
		return nil, fmt.Errorf("%s is not JSON", s.describe())
	case KindUUID:
		switch s.kind {
		case jString:
			u, ok := parseUUID(s.text)
			if !ok {
				return nil, fmt.Errorf("%s is not a UUID", quoteValue(s.text))
			}
			return u, nil
		case sBytes:
			if len(s.text) == 16 {
				return [16]byte(s.text), nil
			}
		}
		return nil, fmt.Errorf("%s is not a UUID", s.describe())
	case KindBytes:
		switch {
		case s.kind == jString && s.fromJSON:
			b, err := base64.StdEncoding.DecodeString(unsafe.String(unsafe.SliceData(s.text), len(s.text)))
			if err != nil {
				return nil, fmt.Errorf("%s is not base64", quoteValue(s.text))
			}
			return b, nil
		case s.kind == jString || s.kind == sBytes:
			return append([]byte{}, s.text...), nil
		case s.fromJSON:
			return append([]byte{}, s.raw...), nil
		}
		return nil, fmt.Errorf("%s is not bytes", s.describe())
	}
	return nil, fmt.Errorf("cannot convert %s to %s", s.describe(), t)
}

// parseInt parses an optionally signed decimal integer without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	i := 0
	if b[0] == '-' || b[0] == '+' {
		neg = b[0] == '-'
		i = 1
		if len(b) == 1 {
			return 0, false
		}
	}
	var n uint64
	for ; i < len(b); i++ {
		c := b[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxUint64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// parseUUID parses the 36-character hyphenated form, the 32-character hex
// form, and either in braces.
func parseUUID(b []byte) ([16]byte, bool) {
	var u [16]byte
	if len(b) == 38 && b[0] == '{' && b[37] == '}' {
		b = b[1:37]
	}
	switch len(b) {
	case 36:
		if b[8] != '-' || b[13] != '-' || b[18] != '-' || b[23] != '-' {
			return u, false
		}
	case 32:
	default:
		return u, false
	}
	j := 0
	for i := 0; i < len(b); i++ {
		if b[i] == '-' && len(b) == 36 {
			continue
		}
		hi, lo := hexVal(b[i]), rune(-1)
		if i+1 < len(b) {
			lo = hexVal(b[i+1])
		}
		if hi < 0 || lo < 0 || j >= 16 {
			return u, false
		}
		u[j] = byte(hi<<4 | lo)
		j++
		i++
	}
	return u, j == 16
}
