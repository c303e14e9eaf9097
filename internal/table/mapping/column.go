package mapping

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/ehsink/ehsink/sinks"
)

// Column is one column of a mapping.
type Column struct {
	// Name is the column name in the sink (a table column, a Parquet field).
	Name string
	// From is where the value comes from.
	From Source
	// Type is the logical type of the value.
	Type Type
	// Nullable allows missing and null values; when false they are an error
	// of the event.
	Nullable bool
}

// NewColumn builds a column from a source string and a type name; an empty
// type name takes the source's default type, and nullability is the
// source's default.
func NewColumn(name, from, typ string) (Column, error) {
	src, err := ParseSource(from)
	if err != nil {
		return Column{}, fmt.Errorf("column %q: %w", name, err)
	}
	c := Column{Name: name, From: src, Type: src.DefaultType(), Nullable: src.DefaultNullable()}
	if typ != "" {
		if c.Type, err = ParseType(typ); err != nil {
			return Column{}, fmt.Errorf("column %q: %w", name, err)
		}
	}
	return c, nil
}

// Columns is a whole mapping, in column order. It decodes itself from
// configuration (see UnmarshalConfig). The zero value is an empty mapping,
// which Validate rejects.
type Columns []Column

// Names returns the column names in order.
func (cs Columns) Names() []string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return names
}

// Index returns the position of the column named name, or -1.
func (cs Columns) Index(name string) int {
	for i, c := range cs {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// Validate checks that the mapping has at least one column, that names are
// unique and non-empty, and that every source and type is valid. Problems
// are [*sinks.FieldError] values (paths relative to the mapping, such as
// "amount.type") joined with errors.Join.
func (cs Columns) Validate() error {
	if len(cs) == 0 {
		return errors.New("at least one column is required")
	}
	var errs []error
	seen := make(map[string]bool, len(cs))
	for i, c := range cs {
		field := c.Name
		if field == "" {
			field = "[" + strconv.Itoa(i) + "]"
			errs = append(errs, &sinks.FieldError{Field: field + ".name", Err: errors.New("required")})
		} else if seen[c.Name] {
			errs = append(errs, &sinks.FieldError{Field: field, Err: errors.New("duplicate column name")})
		}
		seen[c.Name] = true
		if c.From.Kind == SourceInvalid {
			errs = append(errs, &sinks.FieldError{Field: field + ".from", Err: errors.New("required")})
		}
		if !c.Type.Valid() {
			errs = append(errs, &sinks.FieldError{Field: field + ".type", Err: fmt.Errorf("invalid type %s", c.Type)})
		}
	}
	return errors.Join(errs...)
}

// UnmarshalConfig decodes a mapping from a configuration tree (what a YAML
// loader produces): a map from column name to a source string (short form)
// or to {from, type, nullable} (long form), ordered by name; or a list of
// {name, from, type, nullable}, in the order written. Problems are
// [*sinks.FieldError] values with paths relative to the mapping
// ("amount.type", "[2].from"), all of them, joined with errors.Join.
func (cs *Columns) UnmarshalConfig(raw any) error {
	var out Columns
	var errs []error
	switch v := raw.(type) {
	case nil:
	case map[string]any:
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, name := range names {
			c, err := decodeColumn(name, name, v[name], false)
			errs = append(errs, err)
			out = append(out, c)
		}
	case []any:
		for i, item := range v {
			path := "[" + strconv.Itoa(i) + "]"
			c, err := decodeColumn(path, "", item, true)
			errs = append(errs, err)
			out = append(out, c)
		}
	default:
		return fmt.Errorf("want a map of column name to source, or a list of {name, from, type}, not %s", describe(raw))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	*cs = out
	return cs.Validate()
}

// decodeColumn decodes one column at path; named says whether the value
// carries its own name (list form).
func decodeColumn(path, name string, raw any, named bool) (Column, error) {
	fe := func(field string, err error) error {
		if field != "" {
			field = path + "." + field
		} else {
			field = path
		}
		return &sinks.FieldError{Field: field, Err: err}
	}
	var f columnFields
	switch v := raw.(type) {
	case string:
		if named {
			return Column{}, fe("", errors.New("want {name, from, type, nullable}, not a string"))
		}
		f.from = v
	case map[string]any:
		f.name = name
		if err := f.decode(v, named, fe); err != nil {
			return Column{}, err
		}
		name = f.name
	default:
		return Column{}, fe("", fmt.Errorf("want a source string or {from, type, nullable}, not %s", describe(raw)))
	}
	from, typ, nullable := f.from, f.typ, f.nullable
	src, srcErr := ParseSource(from)
	if srcErr != nil {
		srcErr = fe("from", srcErr)
	}
	c := Column{Name: name, From: src, Type: src.DefaultType(), Nullable: src.DefaultNullable()}
	if typ != "" {
		var err error
		if c.Type, err = ParseType(typ); err != nil {
			return Column{}, errors.Join(srcErr, fe("type", err))
		}
	}
	if srcErr != nil {
		return Column{}, srcErr
	}
	if nullable != nil {
		c.Nullable = *nullable
	}
	return c, nil
}

// columnFields are the keys of a column written as a map.
type columnFields struct {
	name, from, typ string
	nullable        *bool
}

// decode reads the keys of v; fe names a key's problem under the
// column's path.
func (f *columnFields) decode(v map[string]any, named bool, fe func(string, error) error) error {
	var errs []error
	str := func(k string, val any, want string, nonEmpty bool) string {
		s, ok := val.(string)
		if !ok || nonEmpty && s == "" {
			errs = append(errs, fe(k, fmt.Errorf("want %s, not %s", want, describe(val))))
		}
		return s
	}
	for k, val := range v {
		switch k {
		case "name":
			if !named {
				errs = append(errs, fe(k, errors.New("unknown key (the map key is the column name)")))
				continue
			}
			f.name = str(k, val, "a non-empty string", true)
		case "from":
			f.from = str(k, val, "a source string", false)
		case "type":
			f.typ = str(k, val, "a type name", false)
		case "nullable":
			switch b := val.(type) {
			case bool:
				f.nullable = &b
			case string:
				pb, err := strconv.ParseBool(b)
				if err != nil {
					errs = append(errs, fe(k, fmt.Errorf("want true or false, not %q", b)))
				}
				f.nullable = &pb
			default:
				errs = append(errs, fe(k, fmt.Errorf("want true or false, not %s", describe(val))))
			}
		default:
			errs = append(errs, fe(k, errors.New("unknown key (want from, type, nullable)")))
		}
	}
	if named && f.name == "" && v["name"] == nil {
		errs = append(errs, fe("name", errors.New("required")))
	}
	if f.from == "" && v["from"] == nil {
		errs = append(errs, fe("from", errors.New("required")))
	}
	return errors.Join(errs...)
}

// describe names the YAML shape of v for error messages, without its value.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "an empty value"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64, int32, uint32, float32:
		return "a number"
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("a %T", v)
}
