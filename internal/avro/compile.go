package avro

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/hamba/avro/v2"
)

// wire is how a value is read from the body (the writer's type).
type wire uint8

const (
	wNull wire = iota
	wBool
	wInt
	wLong
	wFloat
	wDouble
	wBytes
	wString
	wFixed
	wEnum
	wArray
	wMap
	wRecord
	wUnion
)

// view is how a value is rendered (the reader's logical type).
type view uint8

const (
	vPlain view = iota
	vDate
	vTimeMillis
	vTimeMicros
	vTimestampMillis
	vTimestampMicros
	vDecimal
	vUUIDFixed
	vBase64 // bytes or fixed
	vString // bytes read as a string (a reader's string from a writer's bytes)
)

// op is one compiled step: read a value of type wire, render it as view.
type op struct {
	wire  wire
	view  view
	scale int // decimal
	size  int // fixed
	// enum: the JSON of the reader's symbol for each writer index; nil
	// where the reader has none and no default.
	symbols [][]byte
	enumErr []string // the writer's symbol, for the error of a nil entry
	items   *op      // array items, map values
	fields  []field  // record: in the writer's order
	// defaults is `"name":value` for each field only the reader has.
	defaults [][]byte
	// branches of a writer union: nil where the reader has no branch
	// that takes it (branchErr says which).
	branches  []*op
	branchErr []string
}

type field struct {
	key  []byte // `"name":` as the reader names the field; nil: skipped
	name string // the writer's name, for errors
	op   *op
}

// Program turns Avro bodies written with one schema into JSON. Build one
// with [Compile].
type Program struct {
	root *op
	// Writer is the schema the bodies are written with.
	Writer avro.Schema
}

// ParseSchema parses an Avro schema on its own (names it defines do not
// leak into other schemas).
func ParseSchema(text string) (avro.Schema, error) {
	return avro.ParseWithCache(text, "", &avro.SchemaCache{})
}

// Compile builds the program reading bodies written with writer. With a
// reader schema (nil: none), the bodies are resolved into it as the Avro
// specification says; an error says why writer cannot be read as reader.
func Compile(writer, reader avro.Schema) (*Program, error) {
	if reader != nil {
		if err := avro.NewSchemaCompatibility().Compatible(reader, writer); err != nil {
			return nil, fmt.Errorf("the writer schema cannot be read with the reader schema: %w", err)
		}
	}
	c := compiler{memo: map[[2]avro.Schema]*op{}}
	root, err := c.compile(writer, reader, "$")
	if err != nil {
		return nil, err
	}
	return &Program{root: root, Writer: writer}, nil
}

type compiler struct {
	// memo holds the op of each (writer, reader) pair of named schemas
	// being compiled, so that a recursive schema compiles to a cycle.
	memo map[[2]avro.Schema]*op
}

func deref(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

func logical(s avro.Schema) avro.LogicalSchema {
	if l, ok := s.(avro.LogicalTypeSchema); ok {
		return l.Logical()
	}
	return nil
}

// viewOf returns how a value of schema s renders.
func viewOf(s avro.Schema) (view, int) {
	l := logical(s)
	if f, ok := s.(*avro.FixedSchema); ok && l == nil && f.Size() == 16 && f.Prop("logicalType") == "uuid" {
		// hamba/avro leaves a uuid on a fixed (Avro 1.12) a plain fixed.
		return vUUIDFixed, 0
	}
	if l == nil {
		switch s.Type() {
		case avro.Bytes, avro.Fixed:
			return vBase64, 0
		}
		return vPlain, 0
	}
	switch l.Type() {
	case avro.Date:
		return vDate, 0
	case avro.TimeMillis:
		return vTimeMillis, 0
	case avro.TimeMicros:
		return vTimeMicros, 0
	case avro.TimestampMillis, avro.LocalTimestampMillis:
		return vTimestampMillis, 0
	case avro.TimestampMicros, avro.LocalTimestampMicros:
		return vTimestampMicros, 0
	case avro.Decimal:
		return vDecimal, l.(*avro.DecimalLogicalSchema).Scale()
	case avro.UUID:
		if s.Type() == avro.Fixed {
			return vUUIDFixed, 0
		}
	}
	switch s.Type() {
	case avro.Bytes, avro.Fixed:
		return vBase64, 0
	}
	return vPlain, 0
}

var wireOf = map[avro.Type]wire{
	avro.Null: wNull, avro.Boolean: wBool, avro.Int: wInt, avro.Long: wLong,
	avro.Float: wFloat, avro.Double: wDouble, avro.Bytes: wBytes, avro.String: wString,
	avro.Fixed: wFixed, avro.Enum: wEnum, avro.Array: wArray, avro.Map: wMap,
	avro.Record: wRecord, avro.Union: wUnion,
}

// compile builds the op reading w and rendering as r (nil: as w). at is
// the JSON path of the value, for errors.
func (c *compiler) compile(w, r avro.Schema, at string) (*op, error) {
	w = deref(w)
	if r != nil {
		r = deref(r)
	}
	key := [2]avro.Schema{w, r}
	if o, ok := c.memo[key]; ok {
		return o, nil
	}
	if w.Type() == avro.Union {
		return c.union(w.(*avro.UnionSchema), r, at)
	}
	if r != nil && r.Type() == avro.Union {
		b := matchBranch(w, r.(*avro.UnionSchema))
		if b == nil {
			return nil, fmt.Errorf("%s: the reader's union has no branch for the writer's %s", at, w.Type())
		}
		return c.compile(w, b, at)
	}
	view := r
	if view == nil {
		view = w
	}
	o := &op{wire: wireOf[w.Type()]}
	o.view, o.scale = viewOf(view)
	if w.Type() == avro.Bytes && view.Type() == avro.String {
		o.view = vString
	}
	switch w.Type() {
	case avro.Fixed:
		o.size = w.(*avro.FixedSchema).Size()
	case avro.Enum:
		c.enum(o, w.(*avro.EnumSchema), r)
	case avro.Array:
		var ri avro.Schema
		if r != nil {
			ri = r.(*avro.ArraySchema).Items()
		}
		c.memo[key] = o
		items, err := c.compile(w.(*avro.ArraySchema).Items(), ri, at+"[]")
		if err != nil {
			return nil, err
		}
		o.items = items
	case avro.Map:
		var rv avro.Schema
		if r != nil {
			rv = r.(*avro.MapSchema).Values()
		}
		c.memo[key] = o
		values, err := c.compile(w.(*avro.MapSchema).Values(), rv, at+".*")
		if err != nil {
			return nil, err
		}
		o.items = values
	case avro.Record:
		c.memo[key] = o
		if err := c.record(o, w.(*avro.RecordSchema), r, at); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (c *compiler) enum(o *op, w *avro.EnumSchema, r avro.Schema) {
	var re *avro.EnumSchema
	if r != nil {
		re = r.(*avro.EnumSchema)
	}
	for _, s := range w.Symbols() {
		sym := s
		if re != nil && !slices.Contains(re.Symbols(), s) {
			sym = ""
			if re.HasDefault() {
				sym = re.Default()
			}
		}
		var text []byte
		if sym != "" {
			text = strconv.AppendQuote(nil, sym)
		}
		o.symbols = append(o.symbols, text)
		o.enumErr = append(o.enumErr, s)
	}
}

func (c *compiler) record(o *op, w *avro.RecordSchema, r avro.Schema, at string) error {
	var rfields []*avro.Field
	if r != nil {
		rfields = r.(*avro.RecordSchema).Fields()
	}
	seen := make([]bool, len(rfields))
	for _, wf := range w.Fields() {
		f := field{name: wf.Name()}
		var rt avro.Schema
		name := wf.Name()
		if r != nil {
			i := slices.IndexFunc(rfields, func(rf *avro.Field) bool {
				return rf.Name() == wf.Name() || slices.Contains(rf.Aliases(), wf.Name())
			})
			if i < 0 {
				// Only the writer has it: read past it.
				fo, err := c.compile(wf.Type(), nil, at+"."+wf.Name())
				if err != nil {
					return err
				}
				f.op = fo
				o.fields = append(o.fields, f)
				continue
			}
			seen[i] = true
			rt, name = rfields[i].Type(), rfields[i].Name()
		}
		fo, err := c.compile(wf.Type(), rt, at+"."+name)
		if err != nil {
			return err
		}
		f.op = fo
		f.key = append(strconv.AppendQuote(nil, name), ':')
		o.fields = append(o.fields, f)
	}
	for i, rf := range rfields {
		if seen[i] {
			continue
		}
		if !rf.HasDefault() {
			return fmt.Errorf("%s.%s: the reader's field is not in the writer schema and has no default", at, rf.Name())
		}
		def, err := json.Marshal(rf.Default())
		if err != nil {
			return fmt.Errorf("%s.%s: default: %w", at, rf.Name(), err)
		}
		o.defaults = append(o.defaults, append(append(strconv.AppendQuote(nil, rf.Name()), ':'), def...))
	}
	return nil
}

func (c *compiler) union(w *avro.UnionSchema, r avro.Schema, at string) (*op, error) {
	o := &op{wire: wUnion}
	for _, wb := range w.Types() {
		var rb avro.Schema
		if r != nil {
			rb = r
			if ru, ok := r.(*avro.UnionSchema); ok {
				rb = matchBranch(wb, ru)
			} else if !matches(deref(wb), r) {
				rb = nil
			}
			if rb == nil {
				o.branches = append(o.branches, nil)
				o.branchErr = append(o.branchErr, fmt.Sprintf("%s: the writer's union branch %s has no match in the reader schema", at, wb.Type()))
				continue
			}
		}
		b, err := c.compile(wb, rb, at)
		if err != nil {
			return nil, err
		}
		o.branches = append(o.branches, b)
		o.branchErr = append(o.branchErr, "")
	}
	return o, nil
}

// matchBranch returns the first branch of u of w's type (and name), else
// the first w promotes to, else nil.
func matchBranch(w avro.Schema, u *avro.UnionSchema) avro.Schema {
	w = deref(w)
	for _, b := range u.Types() {
		if b = deref(b); b.Type() == w.Type() && sameName(w, b) {
			return b
		}
	}
	for _, b := range u.Types() {
		if b = deref(b); matches(w, b) {
			return b
		}
	}
	return nil
}

func sameName(a, b avro.Schema) bool {
	na, ok1 := a.(avro.NamedSchema)
	nb, ok2 := b.(avro.NamedSchema)
	if !ok1 || !ok2 {
		return true
	}
	return na.FullName() == nb.FullName() || slices.Contains(nb.Aliases(), na.FullName())
}

// matches reports whether a value written as w can be read as r.
func matches(w, r avro.Schema) bool {
	r = deref(r)
	if w.Type() == r.Type() {
		return sameName(w, r)
	}
	switch w.Type() {
	case avro.Int:
		return r.Type() == avro.Long || r.Type() == avro.Float || r.Type() == avro.Double
	case avro.Long:
		return r.Type() == avro.Float || r.Type() == avro.Double
	case avro.Float:
		return r.Type() == avro.Double
	case avro.String:
		return r.Type() == avro.Bytes
	case avro.Bytes:
		return r.Type() == avro.String
	}
	return false
}
