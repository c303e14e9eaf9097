package routing

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// Template is a destination name with placeholders that take values of
// each event: `{$.type}` (a JSON path into the body) or `{@properties.NAME}`
// (any mapping source starting with $ or @). Other text, including other
// placeholders in braces that the sink renders itself (`{partition}`), is
// kept as it is. A Template is immutable and safe for concurrent use.
type Template struct {
	raw    string
	segs   []segment
	mapper *mapping.Mapper // the value placeholders as string columns; nil when static
}

// segment is literal text, or the value placeholder of column col.
type segment struct {
	lit string
	col int // -1 for literal text
}

// ParseTemplate parses s. Text in braces that starts with $ or @ must be a
// valid mapping source.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{raw: s}
	var cols mapping.Columns
	rest := s
	lit := strings.Builder{}
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 || i+1 >= len(rest) || (rest[i+1] != '$' && rest[i+1] != '@') {
			if i < 0 || i+1 >= len(rest) {
				lit.WriteString(rest)
				break
			}
			lit.WriteString(rest[:i+1]) // a sink's own placeholder: kept
			rest = rest[i+1:]
			continue
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("template %q: unclosed {", s)
		}
		lit.WriteString(rest[:i])
		src := rest[i+1 : i+j]
		rest = rest[i+j+1:]
		c, err := mapping.NewColumn("{"+src+"}", src, "string")
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", s, err)
		}
		c.Nullable = false // a destination needs a value
		if lit.Len() > 0 {
			t.segs = append(t.segs, segment{lit: lit.String(), col: -1})
			lit.Reset()
		}
		t.segs = append(t.segs, segment{col: len(cols)})
		cols = append(cols, c)
	}
	if lit.Len() > 0 {
		t.segs = append(t.segs, segment{lit: lit.String(), col: -1})
	}
	if len(cols) > 0 {
		// Two placeholders of one source are two columns of one name.
		for i := range cols {
			cols[i].Name = strconv.Itoa(i) + cols[i].Name
		}
		m, err := mapping.Compile(cols)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", s, err)
		}
		t.mapper = m
	}
	return t, nil
}

// String returns the template as written.
func (t *Template) String() string { return t.raw }

// Static reports whether t has no value placeholders: every event renders
// the same name.
func (t *Template) Static() bool { return t.mapper == nil }

// Sample renders t with each value placeholder replaced by v, for checking
// the literal parts of a template at validation time.
func (t *Template) Sample(v string) string {
	var b strings.Builder
	for _, s := range t.segs {
		if s.col < 0 {
			b.WriteString(s.lit)
		} else {
			b.WriteString(v)
		}
	}
	return b.String()
}

// ErrBadValue is wrapped by the errors of Render for a value that the
// destination cannot take.
var ErrBadValue = errors.New("value not allowed in a destination name")

// Render returns t with each value placeholder replaced by the event's
// value as a string (numbers as their JSON text). A missing or null value,
// a body that is not JSON, or a value that check refuses is an error of
// the event. check may be nil.
func (t *Template) Render(ev *sinks.Event, check func(string) error) (string, error) {
	if t.mapper == nil {
		return t.raw, nil
	}
	cols := t.mapper.Columns()
	var arr [4]any
	vals := arr[:0]
	if len(cols) > len(arr) {
		vals = make([]any, 0, len(cols))
	}
	vals = vals[:len(cols)]
	if err := t.mapper.Map(ev, vals); err != nil {
		return "", fmt.Errorf("destination %q: %w", t.raw, err)
	}
	var b strings.Builder
	for _, s := range t.segs {
		if s.col < 0 {
			b.WriteString(s.lit)
			continue
		}
		v, _ := vals[s.col].(string)
		if check != nil {
			if err := check(v); err != nil {
				return "", fmt.Errorf("destination %q: %s is %q: %w: %w", t.raw, cols[s.col].From, v, ErrBadValue, err)
			}
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
