package mapping

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// refScanner is the scanner as it was before its loops kept the offset in
// a register: the reference the scanner must agree with, error texts
// included (FuzzScanReference).
type refScanner struct {
	data  []byte
	pos   int
	depth int
	spans []span
	buf   []byte // scratch for unescaped keys and strings
	// Exploded scans: the spans of element k are all[k*ncols:(k+1)*ncols].
	ncols  int
	all    []span
	nElems int
	exKind byte // kind of the value at the exploded path
	index  int  // the element being mapped (@index)
}

func (s *refScanner) fail(msg string) error {
	return fmt.Errorf("%w at offset %d: %s", ErrInvalidJSON, s.pos, msg)
}

// scan validates data as one JSON value and records the spans of the
// columns in the trie rooted at root.
func (s *refScanner) scan(data []byte, root *node, ncols int) error {
	s.data, s.pos, s.depth = data, 0, 0
	s.ncols, s.nElems, s.exKind, s.index = ncols, 0, jMissing, 0
	s.all = s.all[:0]
	if cap(s.spans) < ncols {
		s.spans = make([]span, ncols)
	}
	s.spans = s.spans[:ncols]
	clear(s.spans)
	s.ws()
	if s.pos >= len(s.data) {
		return s.fail("empty body")
	}
	if err := s.value(root); err != nil {
		return err
	}
	s.ws()
	if s.pos != len(s.data) {
		return s.fail("data after the JSON value")
	}
	return nil
}

func (s *refScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *refScanner) value(n *node) error {
	if s.pos >= len(s.data) {
		return s.fail("unexpected end of input")
	}
	start := s.pos
	var kind byte
	escaped := false
	var err error
	switch c := s.data[s.pos]; {
	case c == '{':
		kind, err = jObject, s.object(n)
	case c == '[':
		kind, err = jArray, s.array(n)
	case c == '"':
		kind = jString
		escaped, err = s.str()
	case c == 't':
		kind, err = jTrue, s.literal("true")
	case c == 'f':
		kind, err = jFalse, s.literal("false")
	case c == 'n':
		kind, err = jNull, s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		kind, err = jNumber, s.number()
	default:
		return s.fail(fmt.Sprintf("unexpected %q", c))
	}
	if err != nil {
		return err
	}
	if n != nil {
		for _, col := range n.cols {
			s.spans[col] = span{start: start, end: s.pos, kind: kind, escaped: escaped}
		}
		if n.explode != nil {
			s.exKind = kind
		}
	}
	return nil
}

// element starts the spans of the next element of an exploded array and
// returns the column trie to scan it with.
func (s *refScanner) element(cols *node) *node {
	k := s.nElems
	s.nElems++
	end := (k + 1) * s.ncols
	if end > cap(s.all) {
		s.all = append(s.all[:cap(s.all)], make([]span, end-cap(s.all)+len(s.all))...)
	}
	s.all = s.all[:end]
	s.spans = s.all[k*s.ncols : end]
	clear(s.spans)
	return cols
}

func (s *refScanner) object(n *node) error {
	if s.depth++; s.depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.pos++ // {
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("want an object key")
		}
		kstart := s.pos + 1
		escaped, err := s.str()
		if err != nil {
			return err
		}
		var child *node
		if n != nil && n.keys != nil {
			key := s.data[kstart : s.pos-1]
			if escaped {
				s.buf = unescape(s.buf[:0], key)
				key = s.buf
			}
			child = n.keys[string(key)] // the map, not n.child: the scanner under test uses that
		}
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("want : after an object key")
		}
		s.pos++
		s.ws()
		if err := s.value(child); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unterminated object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case '}':
			s.pos++
			s.depth--
			return nil
		default:
			return s.fail("want , or } in an object")
		}
	}
}

func (s *refScanner) array(n *node) error {
	if s.depth++; s.depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.pos++ // [
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		s.depth--
		return nil
	}
	// The elements of an exploded array are scanned with the columns'
	// trie, each into spans of its own.
	exploded := n != nil && n.explode != nil
	outer := s.spans
	for i := 0; ; i++ {
		var child *node
		if exploded {
			child = s.element(n.explode)
		} else if n != nil {
			for _, ic := range n.indexes {
				if ic.index == i {
					child = ic.child
				}
			}
		}
		if err := s.value(child); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.fail("unterminated array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
			s.ws()
		case ']':
			s.pos++
			s.depth--
			s.spans = outer
			return nil
		default:
			return s.fail("want , or ] in an array")
		}
	}
}

// str scans a string starting at its opening quote, validating escapes
// and UTF-8, and reports whether it has escapes.
func (s *refScanner) str() (escaped bool, err error) {
	start := s.pos
	s.pos++
	ascii := true
	for s.pos < len(s.data) {
		for s.pos < len(s.data) && refPlainByte(s.data[s.pos]) {
			s.pos++ // the common case: one table lookup per byte
		}
		if s.pos >= len(s.data) {
			break
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !ascii && !utf8.Valid(s.data[start:s.pos]) {
				return false, fmt.Errorf("%w at offset %d: string is not valid UTF-8", ErrInvalidJSON, start)
			}
			return escaped, nil
		case c == '\\':
			escaped = true
			if s.pos+1 >= len(s.data) {
				return false, s.fail("unterminated escape")
			}
			switch s.data[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(s.data) {
					return false, s.fail("short \\u escape")
				}
				for _, h := range s.data[s.pos+2 : s.pos+6] {
					if hexVal(h) < 0 {
						return false, s.fail("invalid \\u escape")
					}
				}
				s.pos += 6
			default:
				return false, s.fail("invalid escape")
			}
		case c < 0x20:
			return false, s.fail("control character in string")
		default:
			if c >= 0x80 {
				ascii = false
			}
			s.pos++
		}
	}
	return false, s.fail("unterminated string")
}

// refPlainByte reports whether a string scan can pass c without a second
// look: printable ASCII other than the quote and the backslash.
func refPlainByte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

func (s *refScanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

func (s *refScanner) number() error {
	d := s.data
	if d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
	case s.pos < len(d) && d[s.pos] >= '1' && d[s.pos] <= '9':
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	default:
		return s.fail("invalid number")
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if s.pos >= len(d) || d[s.pos] < '0' || d[s.pos] > '9' {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if s.pos >= len(d) || d[s.pos] < '0' || d[s.pos] > '9' {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			s.pos++
		}
	}
	return nil
}

// FuzzScanReference checks that the scanner and refScanner agree on every
// body: the same error text (offsets included), the same spans.
func FuzzScanReference(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":[{"v":1},2,[3],{"v":"x"}]}`, `{"a":[]}`, `[1,2,{"b":"c\u00e9"}]`, `"x"`, `{"a":`, `1e5`, `-0.5`,
		`{"a":"\ud800"}`, "\"\xff\"", ` null `, `{"a":1}}`, `01`, "", "  ", `{"a" : 1 , "b":[ 1 , 2 ] }`, `{"a\u0062":{"c":true}}`, `{"a":tru}`,
		`{"a":"x\q"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"\x01\"}", `{"a":-}`, `{"a":1.}`, `{"a":1e}`, `{"a":1e+}`, `[1 2]`, `{"a" 1}`,
		`{1:2}`, `[`, `{`, `{"a":1,}`, `[1,]`, `{"a":1`, `{"a":1 `, `[1`, `[1 `, `"abc`, `"a\`, `{"b":[0,{"b":7}],"a":[{"v":[1]},{"v":{"w":null}}]}`, "\t\r\n[\"é\", \"\xe2\x82\"]"} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"order_id":"o-1","customer":{"id":"c-1","name":"N"},"currency":"EUR","customer_":1,"created_at":"x","a":{"order_id_":2,"order_id":3}}`))
	f.Add([]byte(`{"k0":0,"k9":9,"k8":[8],"a":{"longer_key":"l","longer_kez":1},"b":"\u0062","k\u0031":1,"order_i\u0064":5}`))
	f.Add([]byte(strings.Repeat("[", maxDepth+1)))
	f.Add([]byte(`{"a":` + strings.Repeat(`{"a":`, maxDepth)))
	var tries []*node
	for _, paths := range [][]string{{"$.a", "$[2].b", "$"}, {"$.b[1].b", "$.a", "$['a b']"},
		{"$.order_id", "$.customer.id", "$.currency", "$.customer_", "$.a.order_id_", "$.created_at"},
		{"$.k0", "$.k1", "$.k2", "$.k3", "$.k4", "$.k5", "$.k6", "$.k7", "$.k8", "$.a.longer_key", "$.b"}} {
		root := &node{}
		for i, p := range paths {
			src, err := ParseSource(p)
			if err != nil {
				f.Fatal(err)
			}
			root.add(src.Path, i%3)
		}
		tries = append(tries, root)
	}
	mx := mustExplode(f, "$.a", "v|$.v", "i|@index", "all|$|json")
	tries = append(tries, mx.root)
	f.Fuzz(func(t *testing.T, body []byte) {
		for k, root := range tries {
			var got scanner
			var want refScanner
			gerr := got.scan(body, root, 3)
			werr := want.scan(body, root, 3)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) {
				t.Fatalf("trie %d, %q: error %v, want %v", k, body, gerr, werr)
			}
			if gerr != nil {
				continue
			}
			if !slices.Equal(got.spans, want.spans) || !slices.Equal(got.all, want.all) || got.nElems != want.nElems || got.exKind != want.exKind {
				t.Fatalf("trie %d, %q: spans %v %v %d %c, want %v %v %d %c", k, body, got.spans, got.all, got.nElems, got.exKind, want.spans, want.all, want.nElems, want.exKind)
			}
		}
	})
}
