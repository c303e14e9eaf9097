package config

import (
	"bytes"
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Marshaler is implemented by types that choose what [Marshal] writes for
// them: MarshalConfig returns a value to write in their place.
type Marshaler interface {
	// MarshalConfig returns the value Marshal writes in place of the
	// receiver.
	MarshalConfig() (any, error)
}

var (
	marshalerType     = reflect.TypeFor[Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	yamlNodeType      = reflect.TypeFor[*yaml.Node]()
)

// Marshal writes v as YAML by the same `yaml` tags [Decode] reads, so that
// its output decodes back to the same value: durations as "1m30s", values
// with a MarshalText method (secrets as ***, [ByteSize] as 64MiB) as their
// text, nil pointers and nil interfaces left out, map keys sorted. A field
// tagged `yaml:",inline"` (or an untagged embedded struct) that holds a
// struct or a map, directly or through a pointer or interface, has its keys
// written into the enclosing map; a key of the enclosing struct shadows an
// inline key of the same name.
func Marshal(v any) ([]byte, error) {
	n, err := encodeValue(reflect.ValueOf(v))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("config: marshal: %w", err)
	}
	return buf.Bytes(), nil
}

func scalarNode(x any) (*yaml.Node, error) {
	var n yaml.Node
	if err := n.Encode(x); err != nil {
		return nil, err
	}
	return &n, nil
}

func encodeValue(v reflect.Value) (*yaml.Node, error) {
	if !v.IsValid() {
		return scalarNode(nil)
	}
	t := v.Type()
	if t == yamlNodeType && !v.IsNil() {
		// A MarshalConfig that edits what Marshal wrote (SinkSpec's
		// columns: auto) returns the node itself.
		return v.Interface().(*yaml.Node), nil
	}
	if t.Implements(marshalerType) && !(t.Kind() == reflect.Pointer && v.IsNil()) {
		repl, err := v.Interface().(Marshaler).MarshalConfig()
		if err != nil {
			return nil, err
		}
		return encodeValue(reflect.ValueOf(repl))
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return scalarNode(nil)
		}
		return encodeValue(v.Elem())
	}
	if t == durationType {
		return scalarNode(v.Interface().(fmt.Stringer).String())
	}
	if t.Implements(textMarshalerType) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return nil, err
		}
		return scalarNode(string(b))
	}
	if v.CanAddr() && reflect.PointerTo(t).Implements(marshalerType) {
		return encodeValue(v.Addr())
	}
	switch t.Kind() {
	case reflect.Struct:
		return encodeStruct(v)
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		type entry struct {
			key string
			val reflect.Value
		}
		var entries []entry
		for it := v.MapRange(); it.Next(); {
			entries = append(entries, entry{fmt.Sprint(it.Key().Interface()), it.Value()})
		}
		slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
		for _, e := range entries {
			val, err := encodeValue(e.val)
			if err != nil {
				return nil, err
			}
			k, _ := scalarNode(e.key)
			n.Content = append(n.Content, k, val)
		}
		return n, nil
	case reflect.Slice, reflect.Array:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if v.Len() == 0 {
			n.Style = yaml.FlowStyle
		}
		for i := range v.Len() {
			item, err := encodeValue(v.Index(i))
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, item)
		}
		return n, nil
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return nil, fmt.Errorf("config: cannot marshal a %s", t)
	}
	return scalarNode(v.Interface())
}

func encodeStruct(v reflect.Value) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	t := v.Type()
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if hasOpt(opts, "inline") || sf.Anonymous && tag == "" && indirectKind(sf.Type) == reflect.Struct {
			if !sf.IsExported() && !sf.Anonymous {
				continue
			}
			inner, err := encodeValue(fv)
			if err != nil {
				return nil, err
			}
			switch inner.Kind {
			case yaml.MappingNode:
				n.Content = append(n.Content, inner.Content...)
			case yaml.ScalarNode:
				if inner.Tag != "!!null" {
					return nil, fmt.Errorf("config: cannot inline field %s of type %s", sf.Name, sf.Type)
				}
			default:
				return nil, fmt.Errorf("config: cannot inline field %s of type %s", sf.Name, sf.Type)
			}
			continue
		}
		if !sf.IsExported() || name == "-" {
			continue
		}
		if (fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Interface) && fv.IsNil() {
			continue
		}
		if hasOpt(opts, "omitempty") && (fv.IsZero() || (fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.Len() == 0) {
			continue // an unused option, such as a sink's explode or routes
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		val, err := encodeValue(fv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		k, _ := scalarNode(name)
		n.Content = append(n.Content, k, val)
	}
	return dedupeKeys(n), nil
}

// dedupeKeys keeps the first of repeated keys in a mapping, so that a field
// of an outer struct shadows an inline field of the same name.
func dedupeKeys(n *yaml.Node) *yaml.Node {
	seen := map[string]bool{}
	content := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !seen[k] {
			seen[k] = true
			content = append(content, n.Content[i], n.Content[i+1])
		}
	}
	n.Content = content
	return n
}

func indirectKind(t reflect.Type) reflect.Kind {
	if t.Kind() == reflect.Pointer {
		return t.Elem().Kind()
	}
	return t.Kind()
}
