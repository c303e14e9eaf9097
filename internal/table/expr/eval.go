package expr

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// vkind is the kind of a value at run time.
type vkind uint8

const (
	vMissing vkind = iota // not in the event (also: "any" at compile time)
	vNull
	vBool
	vNumber
	vString
	vTime
	vOther // a JSON object or array, or a property of another type
)

func (k vkind) String() string {
	switch k {
	case vNull:
		return "null"
	case vBool:
		return "boolean"
	case vNumber:
		return "number"
	case vString:
		return "string"
	case vTime:
		return "timestamp"
	case vOther:
		return "object or array"
	}
	return "missing value"
}

// value is an operand's value for one event. Strings alias the event, a
// literal or the evaluation's scratch buffer.
type value struct {
	kind  vkind
	b     bool
	isInt bool // a number that is an int64 (i); otherwise f
	i     int64
	f     float64
	s     []byte
	t     time.Time
}

func (v value) str() string { return string(v.s) }

// Expr is a compiled condition. It is immutable and safe for concurrent
// use; compile it once (when the configuration is validated) and evaluate
// it per event.
type Expr struct {
	src   string
	root  *cond
	paths *mapping.PathSet // nil when the condition reads no JSON path
	pool  *sync.Pool       // *state
}

func newStatePool() *sync.Pool { return &sync.Pool{New: func() any { return new(state) }} }

// state is the scratch of one evaluation.
type state struct {
	ev      *sinks.Event
	scanned bool
	err     error    // the body is not valid JSON
	unread  *operand // the first path read from it, for the error
	scan    mapping.PathScan
	buf     [2][]byte // unescaped strings, one per side of a comparison
}

// Compile parses and checks a condition (see the package documentation for
// the language). Problems are reported as a [*SyntaxError] naming the
// column.
func Compile(src string) (*Expr, error) {
	p := newParser(src)
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errf(0, "empty condition")
	}
	root, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		if p.tok.kind == tRParen {
			return nil, p.errf(p.tok.pos, "unexpected ) with no ( before it")
		}
		return nil, p.errf(p.tok.pos, "expected and, or or the end of the condition, found %s", p.tok.describe())
	}
	e := &Expr{src: src, root: root}
	if len(p.paths) > 0 {
		e.paths = mapping.NewPathSet(p.paths...)
	}
	e.pool = newStatePool()
	return e, nil
}

// MustCompile is Compile for conditions known to be valid (in tests and
// examples); it panics on an error.
func MustCompile(src string) *Expr {
	e, err := Compile(src)
	if err != nil {
		panic(fmt.Sprintf("expr: Compile(%q): %v", src, err))
	}
	return e
}

// String returns the condition as written.
func (e *Expr) String() string { return e.src }

// ReadsBody reports whether the condition reads JSON paths of the body.
func (e *Expr) ReadsBody() bool { return e.paths != nil }

// MarshalText returns the condition as written, so printed configurations
// read back.
func (e Expr) MarshalText() ([]byte, error) { return []byte(e.src), nil }

// UnmarshalText compiles a condition from configuration.
func (e *Expr) UnmarshalText(b []byte) error {
	c, err := Compile(string(b))
	if err != nil {
		return err
	}
	e.src, e.root, e.paths = c.src, c.root, c.paths
	e.pool = newStatePool()
	return nil
}

// Eval evaluates the condition for ev. The body is parsed only when the
// evaluation reaches a JSON path, at most once. A path into a body that is
// not valid JSON is unknown, and the condition is evaluated in three-valued
// logic (`unknown or true` is true, `unknown and false` is false). When the
// whole condition is unknown, Eval returns false and an error wrapping
// [mapping.ErrInvalidJSON] that names the path: the caller dead-letters the
// event rather than guess. Eval allocates nothing in the steady state.
func (e *Expr) Eval(ev *sinks.Event) (bool, error) {
	if e.root == nil {
		return false, errors.New("expr: the condition was not compiled (use Compile)")
	}
	st := e.pool.Get().(*state)
	st.ev, st.scanned, st.err, st.unread = ev, false, nil, nil
	r := e.eval(e.root, st)
	err, unread := st.err, st.unread
	st.ev, st.unread = nil, nil
	st.scan.Reset()
	e.pool.Put(st)
	if r == unknown {
		return false, &UnknownError{Path: unread.text, Err: err}
	}
	return r == yes, nil
}

// UnknownError is the error of a condition whose value is unknown: it
// reads a JSON path of a body that is not valid JSON, and the rest of the
// condition does not decide without it.
type UnknownError struct {
	// Path is the first path the evaluation could not read, as written.
	Path string
	// Err says why the body is not JSON; it wraps [mapping.ErrInvalidJSON].
	Err error
}

// Error returns "unknown: $.op reads a body that is not JSON: ...".
func (e *UnknownError) Error() string {
	return "unknown: " + e.Path + " reads a body that is not JSON: " + e.Err.Error()
}

// Unwrap returns the body's error.
func (e *UnknownError) Unwrap() error { return e.Err }

// truth is a value of three-valued logic: the value of a comparison that
// reads a path of a body that is not JSON is unknown.
type truth uint8

const (
	no truth = iota
	yes
	unknown
)

func truthOf(b bool) truth {
	if b {
		return yes
	}
	return no
}

// eval evaluates c in Kleene's three-valued logic: and is false when one
// side is false, or is true when one side is true, whatever the unknown
// sides; not unknown is unknown.
func (e *Expr) eval(c *cond, st *state) truth {
	switch c.kind {
	case cAnd:
		r := yes
		for _, k := range c.kids {
			switch e.eval(k, st) {
			case no:
				return no
			case unknown:
				r = unknown
			}
		}
		return r
	case cOr:
		r := no
		for _, k := range c.kids {
			switch e.eval(k, st) {
			case yes:
				return yes
			case unknown:
				r = unknown
			}
		}
		return r
	case cNot:
		switch e.eval(c.kids[0], st) {
		case yes:
			return no
		case no:
			return yes
		}
		return unknown
	case cConst:
		return truthOf(c.val)
	case cExists:
		v, ok := e.value(c.left, st, 0)
		if !ok {
			return unknown
		}
		if c.left.kind == oMeta && c.left.src.Kind != mapping.SourceProperty {
			return truthOf(v.kind != vNull) // an event without a partition key or content type
		}
		return truthOf(v.kind != vMissing)
	case cMatch:
		v, ok := e.value(c.left, st, 0)
		if !ok {
			return unknown
		}
		return truthOf(v.kind == vString && c.re.Match(v.s))
	case cIn:
		v, ok := e.value(c.left, st, 0)
		if !ok {
			return unknown
		}
		for _, l := range c.list {
			if equal(v, l.lit) {
				return yes
			}
		}
		return no
	case cCmp:
		a, okA := e.value(c.left, st, 0)
		b, okB := e.value(c.right, st, 1)
		if !okA || !okB {
			return unknown
		}
		switch c.op {
		case opEq:
			return truthOf(equal(a, b))
		case opNe:
			return truthOf(!equal(a, b))
		}
		n, ok := order(a, b)
		if !ok {
			return no
		}
		switch c.op {
		case opLt:
			return truthOf(n < 0)
		case opLe:
			return truthOf(n <= 0)
		case opGt:
			return truthOf(n > 0)
		default:
			return truthOf(n >= 0)
		}
	}
	return no
}

// value returns an operand's value for st's event; side picks the scratch
// buffer for an escaped string. ok is false for a path into a body that is
// not valid JSON: its value is unknown.
func (e *Expr) value(o *operand, st *state, side int) (v value, ok bool) {
	switch o.kind {
	case oLiteral:
		return o.lit, true
	case oMeta:
		return metaValue(o.src, st.ev), true
	}
	if !st.scanned {
		st.scanned = true
		if err := e.paths.Scan(&st.scan, st.ev.Body); err != nil {
			st.err = err
		}
	}
	if st.err != nil {
		if st.unread == nil {
			st.unread = o
		}
		return value{}, false
	}
	return jsonValue(st.scan.Value(o.path), &st.buf[side]), true
}

// jsonValue converts a value found in the body; buf receives an escaped
// string's content.
func jsonValue(jv mapping.Value, buf *[]byte) value {
	switch jv.Kind() {
	case mapping.JSONNull:
		return value{kind: vNull}
	case mapping.JSONBool:
		return value{kind: vBool, b: jv.Bool()}
	case mapping.JSONNumber:
		if i, ok := jv.Int(); ok {
			return value{kind: vNumber, isInt: true, i: i, f: float64(i)}
		}
		f, _ := jv.Float() // the scanner validated the number
		return value{kind: vNumber, f: f}
	case mapping.JSONString:
		if s, ok := jv.StringView(); ok {
			return value{kind: vString, s: s}
		}
		*buf = jv.AppendString((*buf)[:0])
		return value{kind: vString, s: *buf}
	case mapping.JSONObject, mapping.JSONArray:
		return value{kind: vOther}
	}
	return value{}
}

// bytesOf views s as bytes without copying; the result is only read.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

func metaValue(src mapping.Source, ev *sinks.Event) value {
	switch src.Kind {
	case mapping.SourcePartition:
		return value{kind: vString, s: bytesOf(ev.Partition)}
	case mapping.SourceSequenceNumber:
		return value{kind: vNumber, isInt: true, i: ev.SequenceNumber, f: float64(ev.SequenceNumber)}
	case mapping.SourceOffset:
		return value{kind: vString, s: bytesOf(ev.Offset)}
	case mapping.SourceEnqueuedTime:
		return value{kind: vTime, t: ev.EnqueuedTime}
	case mapping.SourcePartitionKey:
		if ev.PartitionKey == nil {
			return value{kind: vNull}
		}
		return value{kind: vString, s: bytesOf(*ev.PartitionKey)}
	case mapping.SourceContentType:
		if ev.ContentType == nil {
			return value{kind: vNull}
		}
		return value{kind: vString, s: bytesOf(*ev.ContentType)}
	case mapping.SourceBody:
		return value{kind: vString, s: ev.Body}
	case mapping.SourceProperty:
		p, ok := ev.Properties[src.Property]
		if !ok {
			return value{}
		}
		return propertyValue(p)
	}
	return value{}
}

// propertyValue converts an application property by its AMQP type.
func propertyValue(p any) value {
	num := func(i int64) value { return value{kind: vNumber, isInt: true, i: i, f: float64(i)} }
	switch v := p.(type) {
	case nil:
		return value{kind: vNull}
	case string:
		return value{kind: vString, s: bytesOf(v)}
	case []byte:
		return value{kind: vString, s: v}
	case bool:
		return value{kind: vBool, b: v}
	case int:
		return num(int64(v))
	case int8:
		return num(int64(v))
	case int16:
		return num(int64(v))
	case int32:
		return num(int64(v))
	case int64:
		return num(v)
	case uint8:
		return num(int64(v))
	case uint16:
		return num(int64(v))
	case uint32:
		return num(int64(v))
	case uint64:
		if v <= math.MaxInt64 {
			return num(int64(v))
		}
		return value{kind: vNumber, f: float64(v)}
	case float32:
		return value{kind: vNumber, f: float64(v)}
	case float64:
		return value{kind: vNumber, f: v}
	case time.Time:
		return value{kind: vTime, t: v}
	}
	return value{kind: vOther}
}

// equal reports whether two values are equal: same kind and same value.
// Values of different kinds are never equal, except a timestamp and a
// string holding an RFC 3339 timestamp of the same instant. A missing value
// equals nothing; objects and arrays equal nothing.
func equal(a, b value) bool {
	if a.kind == vNull && b.kind == vNull {
		return true
	}
	if a.kind == vBool && b.kind == vBool {
		return a.b == b.b
	}
	n, ok := order(a, b)
	return ok && n == 0
}

// order compares two values of an ordered kind (numbers, strings,
// timestamps); ok is false when they do not compare.
func order(a, b value) (n int, ok bool) {
	switch {
	case a.kind == vNumber && b.kind == vNumber:
		if a.isInt && b.isInt {
			return cmpInt(a.i, b.i), true
		}
		switch {
		case a.f < b.f:
			return -1, true
		case a.f > b.f:
			return 1, true
		}
		return 0, true
	case a.kind == vString && b.kind == vString:
		return bytes.Compare(a.s, b.s), true
	case a.kind == vTime && b.kind == vTime:
		return a.t.Compare(b.t), true
	case a.kind == vTime && b.kind == vString:
		t, ok := parseTime(b.s)
		return a.t.Compare(t), ok
	case a.kind == vString && b.kind == vTime:
		t, ok := parseTime(a.s)
		return t.Compare(b.t), ok
	}
	return 0, false
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func parseTime(s []byte) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, unsafe.String(unsafe.SliceData(s), len(s)))
	return t, err == nil
}

// formatValue renders a value as text: a string's content, a number as
// JSON writes it, true/false, a timestamp in RFC 3339 (UTC).
func appendValue(dst []byte, v value) ([]byte, bool) {
	switch v.kind {
	case vString:
		return append(dst, v.s...), true
	case vNumber:
		if v.isInt {
			return strconv.AppendInt(dst, v.i, 10), true
		}
		return strconv.AppendFloat(dst, v.f, 'g', -1, 64), true
	case vBool:
		return strconv.AppendBool(dst, v.b), true
	case vTime:
		return v.t.UTC().AppendFormat(dst, time.RFC3339Nano), true
	}
	return dst, false
}
