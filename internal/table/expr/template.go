package expr

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// ErrNoValue is wrapped by the error of a template whose operand has no
// text for an event: missing, null, or an object or array.
var ErrNoValue = errors.New("no value")

// Template renders text from event values: literal text with operands in
// braces, such as `orders_{$.type}` or `{@properties.tenant}/{$.region}`.
// `{{` and `}}` stand for literal braces. An operand is a JSON path or
// @metadata, as in a condition. It is immutable and safe for concurrent
// use.
type Template struct {
	src   string
	parts []tmplPart
	paths *mapping.PathSet
	pool  *sync.Pool // *state
}

type tmplPart struct {
	lit string
	op  *operand // nil for literal text
}

// CompileTemplate parses a template. Problems are reported as a
// [*SyntaxError] naming the column.
func CompileTemplate(src string) (*Template, error) {
	t := &Template{src: src}
	p := newParser(src)
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, tmplPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '{' && i+1 < len(src) && src[i+1] == '{', c == '}' && i+1 < len(src) && src[i+1] == '}':
			lit.WriteByte(c)
			i++
		case c == '}':
			return nil, errAt(src, i, "unexpected } (write }} for a literal brace)")
		case c == '{':
			p.lx.pos = i + 1
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tPath && p.tok.kind != tMeta {
				return nil, errAt(src, p.tok.pos, "expected a JSON path ($.field) or @metadata after {, found %s", p.tok.describe())
			}
			o, err := p.parseOperand()
			if err != nil {
				return nil, err
			}
			if p.tok.kind == tEOF {
				return nil, errAt(src, i, "unclosed {")
			}
			if p.tok.kind != tRBrace {
				return nil, errAt(src, p.tok.pos, "expected } after %s, found %s", o.text, p.tok.describe())
			}
			flush()
			t.parts = append(t.parts, tmplPart{op: o})
			i = p.tok.pos
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	if len(p.paths) > 0 {
		t.paths = mapping.NewPathSet(p.paths...)
	}
	t.pool = newStatePool()
	return t, nil
}

// String returns the template as written.
func (t *Template) String() string { return t.src }

// Literal reports whether the template has no operand (renders the same
// text for every event).
func (t *Template) Literal() bool {
	for _, p := range t.parts {
		if p.op != nil {
			return false
		}
	}
	return true
}

// MarshalText returns the template as written.
func (t Template) MarshalText() ([]byte, error) { return []byte(t.src), nil }

// UnmarshalText compiles a template from configuration.
func (t *Template) UnmarshalText(b []byte) error {
	c, err := CompileTemplate(string(b))
	if err != nil {
		return err
	}
	t.src, t.parts, t.paths = c.src, c.parts, c.paths
	t.pool = newStatePool()
	return nil
}

// Append renders the template for ev and appends it to dst. Strings are
// written as their content, numbers as JSON writes them, booleans as
// true/false, timestamps in RFC 3339 (UTC). An operand that is missing,
// null, an object or an array is an error wrapping [ErrNoValue]; a body
// that is not valid JSON (when the template reads it) is an error wrapping
// [mapping.ErrInvalidJSON]. It allocates nothing when dst has the capacity.
func (t *Template) Append(dst []byte, ev *sinks.Event) ([]byte, error) {
	if t.pool == nil {
		return dst, errors.New("expr: the template was not compiled (use CompileTemplate)")
	}
	st := t.pool.Get().(*state)
	defer func() {
		st.ev = nil
		st.scan.Reset()
		t.pool.Put(st)
	}()
	st.ev, st.scanned, st.err = ev, false, nil
	for _, p := range t.parts {
		if p.op == nil {
			dst = append(dst, p.lit...)
			continue
		}
		var v value
		if p.op.kind == oPath {
			if !st.scanned {
				st.scanned = true
				if err := t.paths.Scan(&st.scan, ev.Body); err != nil {
					return dst, fmt.Errorf("template %s: %w", t.src, err)
				}
			}
			v = jsonValue(st.scan.Value(p.op.path), &st.buf[0])
		} else {
			v = metaValue(p.op.src, ev)
		}
		var ok bool
		if dst, ok = appendValue(dst, v); !ok {
			return dst, fmt.Errorf("template %s: %s is %s: %w", t.src, p.op.text, describeKind(v.kind), ErrNoValue)
		}
	}
	return dst, nil
}

func describeKind(k vkind) string {
	switch k {
	case vMissing:
		return "missing"
	case vNull:
		return "null"
	}
	return "an object or array"
}
