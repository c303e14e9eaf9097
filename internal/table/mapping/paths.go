package mapping

import (
	"errors"
	"strconv"
	"unsafe"
)

// PathSet finds the values at several JSON paths of a body in one scan,
// with the same path syntax and the same strict JSON validation as a
// mapping. It is what other packages (conditions, templates) use to read
// the body the way a mapping does. A PathSet is immutable and safe for
// concurrent use.
type PathSet struct {
	root *node
	n    int
}

// NewPathSet returns a set of the given paths; the value of paths[i] is
// [PathScan.Value](i) after a scan. A nil or empty path is the whole body.
func NewPathSet(paths ...[]Step) *PathSet {
	ps := &PathSet{root: &node{}, n: len(paths)}
	for i, p := range paths {
		ps.root.add(p, i)
	}
	return ps
}

// Len returns the number of paths in the set.
func (ps *PathSet) Len() int { return ps.n }

// PathScan holds the result of one scan. It is reusable, so that a scan in
// the steady state allocates nothing, and is used by one goroutine at a
// time. Its values alias the scanned body.
type PathScan struct {
	sc scanner
}

// Scan validates body as one JSON value and records the value at each path
// of ps into s. It returns an error wrapping [ErrInvalidJSON] when the
// body is not valid JSON; s's values are then unspecified.
func (ps *PathSet) Scan(s *PathScan, body []byte) error {
	return s.sc.scan(body, ps.root, ps.n)
}

// Value returns the value found at path i of the last scan.
func (s *PathScan) Value(i int) Value {
	sp := s.sc.spans[i]
	if sp.kind == jMissing {
		return Value{}
	}
	return Value{Raw: s.sc.data[sp.start:sp.end], kind: sp.kind, escaped: sp.escaped}
}

// Reset lets go of the last scanned body.
func (s *PathScan) Reset() { s.sc.data = nil }

// JSONKind is the kind of a JSON value found at a path.
type JSONKind uint8

// The kinds of values. JSONMissing is a path that is not in the body;
// JSONNull is a JSON null.
const (
	JSONMissing JSONKind = iota
	JSONNull
	JSONBool
	JSONNumber
	JSONString
	JSONObject
	JSONArray
)

// String returns the kind's name as the documentation spells it.
func (k JSONKind) String() string {
	switch k {
	case JSONNull:
		return "null"
	case JSONBool:
		return "boolean"
	case JSONNumber:
		return "number"
	case JSONString:
		return "string"
	case JSONObject:
		return "object"
	case JSONArray:
		return "array"
	}
	return "missing"
}

// Value is the value at a path of a scanned body. The zero Value is a
// missing one.
type Value struct {
	// Raw is the JSON text of the value (strings with their quotes); nil
	// when missing.
	Raw     []byte
	kind    byte
	escaped bool
}

// Kind returns the value's kind.
func (v Value) Kind() JSONKind {
	switch v.kind {
	case jNull:
		return JSONNull
	case jTrue, jFalse:
		return JSONBool
	case jNumber:
		return JSONNumber
	case jString:
		return JSONString
	case jObject:
		return JSONObject
	case jArray:
		return JSONArray
	}
	return JSONMissing
}

// Bool reports whether the value is JSON true.
func (v Value) Bool() bool { return v.kind == jTrue }

// AppendString appends the content of a string value, escapes resolved, to
// dst; other kinds append their JSON text. A string without escapes costs
// one copy and no allocation when dst has the capacity.
func (v Value) AppendString(dst []byte) []byte {
	if v.kind != jString {
		return append(dst, v.Raw...)
	}
	text := v.Raw[1 : len(v.Raw)-1]
	if !v.escaped {
		return append(dst, text...)
	}
	return unescape(dst, text)
}

// StringView returns the content of a string value without escapes,
// aliasing the body, and true; or nil and false when the value is not a
// string or has escapes (use AppendString then).
func (v Value) StringView() ([]byte, bool) {
	if v.kind != jString || v.escaped {
		return nil, false
	}
	return v.Raw[1 : len(v.Raw)-1], true
}

// Int returns a number value as an int64 when it is an integer that fits.
func (v Value) Int() (int64, bool) {
	if v.kind != jNumber {
		return 0, false
	}
	return parseInt(v.Raw)
}

// Float returns a number value as a float64 (±Inf beyond its range).
func (v Value) Float() (float64, bool) {
	if v.kind != jNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(v.Raw), len(v.Raw)), 64)
	return f, err == nil || errors.Is(err, strconv.ErrRange)
}
