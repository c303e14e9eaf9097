package config

import (
	"reflect"
	"slices"
)

// KeyPaths lists the key paths that [Decode] accepts for a value of type t,
// sorted, with the field rules Decode uses (tags, inline structs, untagged
// fields by their lower-cased name). A path ends where Decode stops looking
// at keys: at a scalar, a duration, a map, a list of scalars, or a type that
// decodes itself ([Unmarshaler], [encoding.TextUnmarshaler]); a list of
// structs continues with "[]" (`routes[].when`), and ends at a list of the
// struct it is in (`elements`, a list of the expectations that hold it). A
// struct reached through a pointer is listed as well as its keys
// (`emulator.demo`, which turns the section on by itself); so is a struct
// without keys. The documentation test
// of docs/configuration.md walks the spec with it.
func KeyPaths(t reflect.Type) []string {
	var out []string
	keyPaths("", t, map[reflect.Type]bool{}, &out)
	slices.Sort(out)
	return slices.Compact(out)
}

func keyPaths(path string, t reflect.Type, visiting map[reflect.Type]bool, out *[]string) {
	if t.Kind() == reflect.Pointer {
		if path != "" && t.Elem().Kind() == reflect.Struct {
			*out = append(*out, path) // `section:` alone turns it on
		}
		t = t.Elem()
	}
	if isLeaf(t) {
		if path != "" {
			*out = append(*out, path)
		}
		return
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		e := t.Elem()
		if e.Kind() == reflect.Pointer {
			e = e.Elem()
		}
		if e.Kind() != reflect.Struct || isLeaf(e) || visiting[e] {
			*out = append(*out, path)
			return
		}
		keyPaths(path+"[]", e, visiting, out)
	case reflect.Struct:
		fields := fieldsOf(t)
		if len(fields) == 0 || visiting[t] {
			*out = append(*out, path)
			return
		}
		visiting[t] = true
		defer delete(visiting, t)
		for _, f := range fields {
			ft := t.FieldByIndex(f.index).Type
			keyPaths(JoinPath(path, f.name), ft, visiting, out)
		}
	default:
		if path != "" {
			*out = append(*out, path)
		}
	}
}

// isLeaf reports whether Decode decodes a value of type t as a whole, not
// key by key.
func isLeaf(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	if t == durationType || p.Implements(unmarshalerType) || p.Implements(textUnmarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Array:
		return false
	}
	return true
}
