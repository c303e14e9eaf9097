package amqp

import (
	"fmt"
)

// fields reads the positional fields of a performative or other composite
// list, converting each to the Go type the field is declared with. The
// first conversion error sticks so callers can read all fields and check
// once.
type fields struct {
	what string
	l    List
	err  error
}

// decodeComposite decodes b as described(descriptor, list) and checks the
// descriptor. Descriptors may be the numeric code or the symbolic name.
func decodeComposite(b []byte, what string, code uint64) (*fields, int, error) {
	v, n, err := Decode(b)
	if err != nil {
		return nil, n, fmt.Errorf("%s: %w", what, err)
	}
	f, err := compositeFields(v, what, code)
	return f, n, err
}

// compositeFields checks an already decoded described list.
func compositeFields(v any, what string, code uint64) (*fields, error) {
	d, ok := v.(Described)
	if !ok {
		return nil, &DecodeError{What: what, Reason: fmt.Sprintf("expected a described list, got %T", v)}
	}
	if c, ok := d.Descriptor.(uint64); !ok || c != code {
		return nil, &DecodeError{What: what, Reason: fmt.Sprintf("descriptor %v, want %#x", d.Descriptor, code)}
	}
	l, ok := d.Value.(List)
	if !ok {
		return nil, &DecodeError{What: what, Reason: fmt.Sprintf("body is %T, not a list", d.Value)}
	}
	return &fields{what: what, l: l}, nil
}

func (f *fields) get(i int) any {
	if i < len(f.l) {
		return f.l[i]
	}
	return nil
}

func (f *fields) bad(i int, want string) {
	if f.err == nil {
		f.err = &DecodeError{What: f.what, Reason: fmt.Sprintf("field %d is %T, want %s", i, f.get(i), want)}
	}
}

func (f *fields) mandatory(i int) {
	if f.err == nil && f.get(i) == nil {
		f.err = &DecodeError{What: f.what, Reason: fmt.Sprintf("mandatory field %d is missing", i)}
	}
}

func (f *fields) str(i int) string {
	switch v := f.get(i).(type) {
	case nil:
	case string:
		return v
	case Symbol:
		return string(v)
	default:
		f.bad(i, "string")
	}
	return ""
}

func (f *fields) sym(i int) Symbol {
	switch v := f.get(i).(type) {
	case nil:
	case Symbol:
		return v
	default:
		f.bad(i, "symbol")
	}
	return ""
}

// uint accepts any unsigned width, since peers pick the smallest encoding.
func (f *fields) uint(i int, def uint32) uint32 {
	switch v := f.get(i).(type) {
	case nil:
		return def
	case uint8:
		return uint32(v)
	case uint16:
		return uint32(v)
	case uint32:
		return v
	case uint64:
		if v <= 1<<32-1 {
			return uint32(v)
		}
	}
	f.bad(i, "uint")
	return def
}

func (f *fields) optUint(i int) *uint32 {
	if f.get(i) == nil {
		return nil
	}
	v := f.uint(i, 0)
	return &v
}

func (f *fields) ulong(i int) uint64 {
	switch v := f.get(i).(type) {
	case nil:
		return 0
	case uint64:
		return v
	case uint32:
		return uint64(v)
	case uint16:
		return uint64(v)
	case uint8:
		return uint64(v)
	}
	f.bad(i, "ulong")
	return 0
}

func (f *fields) ubyte(i int, def uint8) uint8 {
	switch v := f.get(i).(type) {
	case nil:
		return def
	case uint8:
		return v
	}
	f.bad(i, "ubyte")
	return def
}

func (f *fields) optUbyte(i int) *uint8 {
	if f.get(i) == nil {
		return nil
	}
	v := f.ubyte(i, 0)
	return &v
}

func (f *fields) bool(i int) bool {
	switch v := f.get(i).(type) {
	case nil:
		return false
	case bool:
		return v
	}
	f.bad(i, "boolean")
	return false
}

func (f *fields) binary(i int) []byte {
	switch v := f.get(i).(type) {
	case nil:
		return nil
	case []byte:
		return v
	}
	f.bad(i, "binary")
	return nil
}

// symbols reads a multiple-symbol field: AMQP allows a single symbol or an
// array of them.
func (f *fields) symbols(i int) []Symbol {
	switch v := f.get(i).(type) {
	case nil:
		return nil
	case Symbol:
		return []Symbol{v}
	case Array:
		out := make([]Symbol, 0, len(v.Elems))
		for _, e := range v.Elems {
			s, ok := e.(Symbol)
			if !ok {
				f.bad(i, "symbol array")
				return nil
			}
			out = append(out, s)
		}
		return out
	}
	f.bad(i, "symbol array")
	return nil
}

func (f *fields) fieldMap(i int) Map {
	switch v := f.get(i).(type) {
	case nil:
		return nil
	case Map:
		return v
	}
	f.bad(i, "map")
	return nil
}

func (f *fields) errorField(i int) *Error {
	v := f.get(i)
	if v == nil {
		return nil
	}
	e, err := errorFromValue(v)
	if err != nil && f.err == nil {
		f.err = err
	}
	return e
}

// fieldWriter encodes a composite as described(code, list32 fields) with
// every field of the type present, null when absent. The spec allows a
// sender to trim trailing nulls, but some clients (pyamqp, the Python
// Event Hubs SDK) index the received field list by position without
// padding it; they work against the service, which sends full lists.
type fieldWriter struct {
	dst   []byte
	at    int // offset of the list size field
	count int // fields written so far
	err   error
}

func newFieldWriter(dst []byte, code uint64) *fieldWriter {
	dst = AppendDescriptor(dst, code)
	dst, at := compoundStart(dst, codeList32)
	return &fieldWriter{dst: dst, at: at}
}

func (w *fieldWriter) null() { w.dst = append(w.dst, codeNull); w.count++ }

func (w *fieldWriter) any(v any) {
	if v == nil {
		w.null()
		return
	}
	var err error
	if w.dst, err = Append(w.dst, v); err != nil && w.err == nil {
		w.err = err
	}
	w.count++
}

func (w *fieldWriter) str(s string) { w.dst = AppendString(w.dst, s); w.count++ }

func (w *fieldWriter) strOmitEmpty(s string) {
	if s == "" {
		w.null()
		return
	}
	w.str(s)
}

func (w *fieldWriter) sym(s Symbol) {
	if s == "" {
		w.null()
		return
	}
	w.dst = AppendSymbol(w.dst, s)
	w.count++
}

func (w *fieldWriter) uint(v uint32) { w.dst = AppendUint(w.dst, v); w.count++ }

// uintDef writes v, or null when v equals the field's default.
func (w *fieldWriter) uintDef(v, def uint32) {
	if v == def {
		w.null()
		return
	}
	w.uint(v)
}

func (w *fieldWriter) optUint(v *uint32) {
	if v == nil {
		w.null()
		return
	}
	w.uint(*v)
}

func (w *fieldWriter) ulongOmitZero(v uint64) {
	if v == 0 {
		w.null()
		return
	}
	w.dst = AppendUlong(w.dst, v)
	w.count++
}

func (w *fieldWriter) optUbyte(v *uint8) {
	if v == nil {
		w.null()
		return
	}
	w.dst = append(w.dst, codeUbyte, *v)
	w.count++
}

func (w *fieldWriter) bool(v bool) { w.dst = AppendBool(w.dst, v); w.count++ }

func (w *fieldWriter) boolOmitFalse(v bool) {
	if !v {
		w.null()
		return
	}
	w.bool(v)
}

func (w *fieldWriter) binary(p []byte) {
	if p == nil {
		w.null()
		return
	}
	w.dst = AppendBinary(w.dst, p)
	w.count++
}

func (w *fieldWriter) symbols(s []Symbol) {
	if s == nil {
		w.null()
		return
	}
	w.dst = AppendSymbolArray(w.dst, s)
	w.count++
}

func (w *fieldWriter) fieldMap(m Map) {
	if m == nil {
		w.null()
		return
	}
	w.any(m)
}

// marshaler writes a composite field; typed nil pointers become null.
func (w *fieldWriter) marshaler(m Marshaler, isNil bool) {
	if isNil {
		w.null()
		return
	}
	var err error
	if w.dst, err = m.AppendAMQP(w.dst); err != nil && w.err == nil {
		w.err = err
	}
	w.count++
}

func (w *fieldWriter) done() ([]byte, error) {
	if w.err != nil {
		return w.dst, w.err
	}
	return compoundEnd(w.dst, w.at, w.count), nil
}
