package mapping

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ehsink/ehsink/sinks"
)

// ErrExplode is wrapped by the error of an event whose exploded path is
// missing or not an array: the event makes no row and is dead-lettered.
var ErrExplode = errors.New("cannot explode")

// Path is a JSON path written in configuration, such as the `explode:` key
// of a sink (`$.records`). The zero Path is unset.
type Path struct {
	steps []Step
	set   bool
}

// ParsePath parses a JSON path ($, $.a.b, $.a[0], $['a b']); an empty
// string is the unset Path.
func ParsePath(s string) (Path, error) {
	if s == "" {
		return Path{}, nil
	}
	src, err := ParseSource(s)
	if err != nil {
		return Path{}, err
	}
	if src.Kind != SourceJSON {
		return Path{}, fmt.Errorf("%s: want a JSON path into the body, such as $.records", s)
	}
	return Path{steps: src.Path, set: true}, nil
}

// IsSet reports whether the path was given.
func (p Path) IsSet() bool { return p.set }

// Steps returns the path's steps; the caller must not modify them.
func (p Path) Steps() []Step { return p.steps }

// String returns the path as written ($.records), or "" when unset.
func (p Path) String() string {
	if !p.set {
		return ""
	}
	return Source{Kind: SourceJSON, Path: p.steps}.String()
}

// MarshalText writes the path as String does.
func (p Path) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText parses a path with ParsePath.
func (p *Path) UnmarshalText(b []byte) error {
	v, err := ParsePath(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Options change how a mapping turns events into rows.
type Options struct {
	// Explode, when set, makes one row per element of the array at this
	// path of the body: the element is the `$` of the columns' JSON paths,
	// the event's metadata stay available, and @index is the element's
	// position (from 0). An event whose path is missing or not an array is
	// an error wrapping [ErrExplode]; an empty array makes no row.
	Explode Path
}

// Validate checks the options against the columns: @index needs Explode.
// Problems are [*sinks.FieldError] values with paths relative to the
// mapping ("pos.from"), as [Columns.Validate] reports them.
func (o Options) Validate(cols Columns) error {
	if o.Explode.IsSet() {
		return nil
	}
	var errs []error
	for _, c := range cols {
		if c.From.Kind == SourceIndex {
			errs = append(errs, &sinks.FieldError{Field: c.Name + ".from",
				Err: errors.New("@index is the position of an exploded element: set explode (such as explode: $.records)")})
		}
	}
	return errors.Join(errs...)
}

// ElementError is the failure of one element of an exploded event; the
// other elements are not affected.
type ElementError struct {
	// Index is the element's position in the array.
	Index int
	// Err says why, usually [*ColumnError] values.
	Err error
}

// Error returns "element N: why".
func (e *ElementError) Error() string {
	return "element " + strconv.Itoa(e.Index) + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *ElementError) Unwrap() error { return e.Err }

// Rows is the result of [Mapper.Rows]: the rows an event makes. It is
// used by one goroutine and must be released with Close.
type Rows struct {
	m  *Mapper
	sc *scanner
	ev *sinks.Event
	n  int
}

// Rows parses ev once and returns its rows: one per element of the
// exploded array, or one for a mapper without Explode. It returns an error
// for the whole event: a body that is not valid JSON ([ErrInvalidJSON]), or
// an exploded path that is missing or not an array ([ErrExplode]). The
// result is valid until Close, and only while ev is not modified.
func (m *Mapper) Rows(ev *sinks.Event) (*Rows, error) {
	sc := m.pool.Get().(*scanner)
	r := &sc.rows
	*r = Rows{m: m, sc: sc, ev: ev, n: 1}
	if len(sc.boxes) != len(m.cols) {
		sc.boxes = make([]boxed, len(m.cols))
	}
	if !m.needScan {
		return r, nil
	}
	if err := sc.scan(ev.Body, m.root, len(m.cols)); err != nil {
		r.Close()
		return nil, err
	}
	if m.exploded() {
		switch sc.exKind {
		case jArray:
			r.n = sc.nElems
		case jMissing:
			r.Close()
			return nil, fmt.Errorf("%w %s: the path is not in the body", ErrExplode, m.explode)
		default:
			r.Close()
			return nil, fmt.Errorf("%w %s: the value is %s, not an array", ErrExplode, m.explode, kindName(sc.exKind))
		}
	}
	return r, nil
}

// Exploded reports whether the rows are elements of an exploded array.
func (r *Rows) Exploded() bool { return r.m.exploded() }

// Len returns the number of rows.
func (r *Rows) Len() int { return r.n }

// Map converts row i into row, which must have one element per column (see
// [Mapper.Map] for the values). A failure of an exploded element is an
// [*ElementError]; of an event without Explode, what Map returns.
func (r *Rows) Map(i int, row []any) error {
	m := r.m
	if i < 0 || i >= r.n {
		return fmt.Errorf("mapping: row %d of %d", i, r.n)
	}
	if m.exploded() {
		ncols := len(m.cols)
		r.sc.spans = r.sc.all[i*ncols : (i+1)*ncols]
		r.sc.index = i
		if err := m.mapScanned(r.ev, row, r.sc); err != nil {
			return &ElementError{Index: i, Err: err}
		}
		return nil
	}
	return m.mapScanned(r.ev, row, r.sc)
}

// Close releases the rows.
func (r *Rows) Close() {
	sc, m := r.sc, r.m
	if sc == nil {
		return
	}
	*r = Rows{}
	sc.data = nil // do not keep the body alive in the pool
	m.pool.Put(sc)
}

func kindName(k byte) string {
	switch k {
	case jNull:
		return "null"
	case jTrue, jFalse:
		return "a boolean"
	case jNumber:
		return "a number"
	case jString:
		return "a string"
	case jObject:
		return "an object"
	}
	return "an array"
}
