package config

import (
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Unmarshaler is implemented by types that decode themselves from a raw
// config value, for shapes the reflective rules do not cover (a column
// mapping written either as a map or as a list, a size with units). raw is
// what koanf loaded: map[string]any, []any, string, bool, int, float64, or nil
// when the key is present with no value. Problems should be returned as
// [*Error] (or [*sinks.FieldError]) values with paths relative to the value
// (joined with [errors.Join]); [Decode] prefixes them with the value's own
// path. An
// implementation may call Decode on parts of raw.
type Unmarshaler interface {
	// UnmarshalConfig sets the receiver from raw, the YAML tree of its key.
	UnmarshalConfig(raw any) error
}

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Decode decodes raw, a tree loaded by koanf (or built by hand from maps,
// slices and scalars), into the value dst points to, strictly: keys that
// name no field are errors. See the package documentation for the supported
// types. It reports every problem it finds, as [*Error] values joined with
// [errors.Join], and decodes what it can of the rest.
func Decode(raw any, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("config: Decode needs a non-nil pointer, got %T", dst)
	}
	var d decoder
	d.decode("", raw, rv.Elem())
	return errors.Join(d.errs...)
}

type decoder struct {
	errs []error // every problem so far, each a *Error
}

func (d *decoder) fail(path string, err error) {
	for _, e := range Errors(err) {
		d.errs = append(d.errs, &Error{Path: JoinPath(path, e.Path), Err: e.Err})
	}
}

func (d *decoder) failf(path, format string, args ...any) {
	d.errs = append(d.errs, &Error{Path: path, Err: fmt.Errorf(format, args...)})
}

func (d *decoder) decode(path string, raw any, v reflect.Value) {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		// The key is present: allocate, even for an empty value, so that
		// `section:` alone turns a section on with its defaults.
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(path, raw, v.Elem())
		return
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(unmarshalerType) {
		if err := v.Addr().Interface().(Unmarshaler).UnmarshalConfig(raw); err != nil {
			d.fail(path, err)
		}
		return
	}
	if t.Kind() == reflect.Interface {
		d.decodeInterface(path, raw, v)
		return
	}
	if raw == nil {
		return // present with no value: keep what is there (the default)
	}
	if t == durationType {
		d.decodeDuration(path, raw, v)
		return
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(textUnmarshaler) {
		if s, ok := scalarString(raw); ok {
			if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
				d.fail(path, err)
			}
			return
		}
		if t.Kind() == reflect.Struct {
			d.failf(path, "expected a string, got %s", describe(raw))
			return
		}
	}
	switch t.Kind() {
	case reflect.Struct:
		d.decodeStruct(path, raw, v)
	case reflect.Map:
		d.decodeMap(path, raw, v)
	case reflect.Slice, reflect.Array:
		d.decodeList(path, raw, v)
	case reflect.String:
		s, ok := scalarString(raw)
		if !ok {
			d.failf(path, "expected a string, got %s", describe(raw))
			return
		}
		v.SetString(s)
	case reflect.Bool:
		d.decodeBool(path, raw, v)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		d.decodeNumber(path, raw, v)
	default:
		d.failf(path, "config: cannot decode into a field of type %s", t)
	}
}

// decodeNumber decodes an integer or a float field, refusing a value the
// field cannot hold.
func (d *decoder) decodeNumber(path string, raw any, v reflect.Value) {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		f, err := parseFloat(raw)
		if err != nil {
			d.fail(path, err)
			return
		}
		if v.OverflowFloat(f) {
			d.failf(path, "%g is out of range for this field", f)
			return
		}
		v.SetFloat(f)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := parseInt(raw)
		if err != nil {
			d.fail(path, err)
			return
		}
		if v.OverflowInt(n) {
			d.failf(path, "%d is out of range for this field", n)
			return
		}
		v.SetInt(n)
	default:
		n, err := parseInt(raw)
		if err != nil {
			d.fail(path, err)
			return
		}
		if n < 0 || v.OverflowUint(uint64(n)) {
			d.failf(path, "%d is out of range for this field (must not be negative)", n)
			return
		}
		v.SetUint(uint64(n))
	}
}

func (d *decoder) decodeInterface(path string, raw any, v reflect.Value) {
	// An interface holding a non-nil pointer (a sink config made by its
	// driver) is decoded into, as encoding/json does.
	if !v.IsNil() && v.Elem().Kind() == reflect.Pointer && !v.Elem().IsNil() {
		d.decode(path, raw, v.Elem().Elem())
		return
	}
	if raw == nil {
		return
	}
	rv := reflect.ValueOf(raw)
	if !rv.Type().AssignableTo(v.Type()) {
		d.failf(path, "cannot use %s here (want %s)", describe(raw), v.Type())
		return
	}
	v.Set(rv)
}

func (d *decoder) decodeDuration(path string, raw any, v reflect.Value) {
	s, isString := raw.(string)
	if !isString {
		if n, err := parseInt(raw); err == nil && n == 0 {
			v.SetInt(0)
			return
		}
		if isNumber(raw) {
			d.failf(path, "%v has no unit: write a duration such as \"500ms\", \"30s\" or \"1m\"", raw)
			return
		}
		d.failf(path, "expected a duration such as \"500ms\" or \"1m\", got %s", describe(raw))
		return
	}
	s = strings.TrimSpace(s)
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		d.failf(path, "%q has no unit: write a duration such as \"500ms\", \"30s\" or \"1m\"", s)
		return
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.failf(path, "%s is not a duration: write a number with a unit (ns, us, ms, s, m, h), e.g. \"500ms\" or \"1m30s\"", Quote(s))
		return
	}
	v.SetInt(int64(dur))
}

func (d *decoder) decodeBool(path string, raw any, v reflect.Value) {
	switch b := raw.(type) {
	case bool:
		v.SetBool(b)
		return
	case string:
		switch strings.ToLower(strings.TrimSpace(b)) {
		case "true", "yes", "on", "1":
			v.SetBool(true)
			return
		case "false", "no", "off", "0":
			v.SetBool(false)
			return
		}
	}
	d.failf(path, "expected true or false, got %s", describe(raw))
}

// field is a decodable struct field: its key and its index path (through
// inline structs).
type field struct {
	name  string
	index []int
}

var fieldCache sync.Map // reflect.Type -> []field; types never change, so caching is safe

// fieldsOf lists the keys of a struct type, outer fields before inline ones.
func fieldsOf(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	var out []field
	seen := map[string]bool{}
	type pending struct {
		t     reflect.Type
		index []int
	}
	queue := []pending{{t: t}}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		var inline []pending
		for i := range p.t.NumField() {
			sf := p.t.Field(i)
			name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
			index := append(slices.Clone(p.index), i)
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			isInline := ft.Kind() == reflect.Struct && (hasOpt(opts, "inline") || sf.Anonymous && name == "" && sf.Tag.Get("yaml") == "")
			if isInline {
				inline = append(inline, pending{t: ft, index: index})
				continue
			}
			if !sf.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = strings.ToLower(sf.Name)
			}
			if !seen[name] {
				seen[name] = true
				out = append(out, field{name: name, index: index})
			}
		}
		queue = append(queue, inline...)
	}
	fieldCache.Store(t, out)
	return out
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

// fieldByIndex is reflect.Value.FieldByIndex, allocating nil inline pointers.
func fieldByIndex(v reflect.Value, index []int) reflect.Value {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

func (d *decoder) decodeStruct(path string, raw any, v reflect.Value) {
	m, ok := asMap(raw)
	if !ok {
		d.failf(path, "expected a map of keys, got %s", describe(raw))
		return
	}
	fields := fieldsOf(v.Type())
	for _, key := range sortedKeys(m) {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == key })
		if i < 0 {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.name
			}
			d.errs = append(d.errs, &Error{Path: JoinPath(path, keyPath(key)), Err: unknownKey(key, names)})
			continue
		}
		d.decode(JoinPath(path, keyPath(key)), m[key], fieldByIndex(v, fields[i].index))
	}
}

func (d *decoder) decodeMap(path string, raw any, v reflect.Value) {
	m, ok := asMap(raw)
	if !ok {
		d.failf(path, "expected a map, got %s", describe(raw))
		return
	}
	t := v.Type()
	out := reflect.MakeMapWithSize(t, len(m))
	for _, key := range sortedKeys(m) {
		kp := JoinPath(path, keyPath(key))
		kv := reflect.New(t.Key()).Elem()
		switch t.Key().Kind() {
		case reflect.String:
			kv.SetString(key)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			n, err := strconv.ParseInt(key, 10, 64)
			if err != nil || kv.OverflowInt(n) {
				d.failf(kp, "key %q is not an integer", key)
				continue
			}
			kv.SetInt(n)
		default:
			d.failf(path, "config: cannot decode into a map with %s keys", t.Key())
			return
		}
		ev := reflect.New(t.Elem()).Elem()
		d.decode(kp, m[key], ev)
		out.SetMapIndex(kv, ev)
	}
	v.Set(out)
}

func (d *decoder) decodeList(path string, raw any, v reflect.Value) {
	list, ok := asList(raw)
	if !ok {
		d.failf(path, "expected a list, got %s", describe(raw))
		return
	}
	t := v.Type()
	if t.Kind() == reflect.Array {
		if len(list) != t.Len() {
			d.failf(path, "expected a list of %d items, got %d", t.Len(), len(list))
			return
		}
		for i, item := range list {
			d.decode(fmt.Sprintf("%s[%d]", path, i), item, v.Index(i))
		}
		return
	}
	out := reflect.MakeSlice(t, len(list), len(list))
	for i, item := range list {
		d.decode(fmt.Sprintf("%s[%d]", path, i), item, out.Index(i))
	}
	v.Set(out)
}

// asMap returns raw as a map with string keys, from any map type.
func asMap(raw any) (map[string]any, bool) {
	if m, ok := raw.(map[string]any); ok {
		return m, true
	}
	rv := reflect.ValueOf(raw)
	if rv.Kind() != reflect.Map {
		return nil, false
	}
	m := make(map[string]any, rv.Len())
	for it := rv.MapRange(); it.Next(); {
		m[fmt.Sprint(it.Key().Interface())] = it.Value().Interface()
	}
	return m, true
}

// asList returns raw as []any, from any slice or array type.
func asList(raw any) ([]any, bool) {
	if l, ok := raw.([]any); ok {
		return l, true
	}
	rv := reflect.ValueOf(raw)
	if rv.Kind() != reflect.Slice && rv.Kind() != reflect.Array {
		return nil, false
	}
	l := make([]any, rv.Len())
	for i := range l {
		l[i] = rv.Index(i).Interface()
	}
	return l, true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keyPath writes a key as a path element: plain keys as they are, others
// (with dots, spaces, brackets) quoted in brackets.
func keyPath(key string) string {
	if key == "" || strings.ContainsAny(key, ".[]\"' \t\n") {
		return "[" + strconv.Quote(key) + "]"
	}
	return key
}

// scalarString returns a scalar as the string a user would have written.
func scalarString(raw any) (string, bool) {
	switch x := raw.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32), true
	}
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(rv.Uint(), 10), true
	case reflect.String:
		return rv.String(), true
	}
	return "", false
}

func isNumber(raw any) bool {
	switch reflect.ValueOf(raw).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// toInt64 converts integer values, and floats with no fraction, to int64.
func toInt64(raw any) (int64, bool) {
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if rv.Uint() > math.MaxInt64 {
			return 0, false
		}
		return int64(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
			return 0, false
		}
		return int64(f), true
	}
	return 0, false
}

func parseInt(raw any) (int64, error) {
	if s, ok := raw.(string); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("expected an integer, got %s", describe(raw))
		}
		return n, nil
	}
	if n, ok := toInt64(raw); ok {
		return n, nil
	}
	return 0, fmt.Errorf("expected an integer, got %s", describe(raw))
}

func parseFloat(raw any) (float64, error) {
	if s, ok := raw.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil {
			return 0, fmt.Errorf("expected a number, got %s", describe(raw))
		}
		return f, nil
	}
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	}
	if n, ok := toInt64(raw); ok {
		return float64(n), nil
	}
	return 0, fmt.Errorf("expected a number, got %s", describe(raw))
}

// describe names a raw value for an error message without risking a
// secret: strings are quoted only when they look harmless (see quoteValue).
func describe(raw any) string {
	switch x := raw.(type) {
	case nil:
		return "nothing"
	case string:
		return "the string " + Quote(x)
	case bool:
		return strconv.FormatBool(x)
	}
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Map:
		return "a map"
	case reflect.Slice, reflect.Array:
		return "a list"
	}
	if isNumber(raw) {
		s, _ := scalarString(raw)
		return "the number " + s
	}
	return fmt.Sprintf("a %T", raw)
}

// Quote quotes a config value for an error message, unless it may be a
// secret (a connection string, a DSN or URL with credentials, a key: longer
// than 40 characters or holding =, ;, @ or ://), which is described by its
// length instead. Validators use it for values that a user may have filled
// from the wrong variable.
func Quote(s string) string {
	if len(s) > 40 || strings.ContainsAny(s, "=;@") || strings.Contains(s, "://") {
		return fmt.Sprintf("(%d characters, not shown)", len(s))
	}
	return strconv.Quote(s)
}
