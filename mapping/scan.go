package mapping

import (
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// ErrInvalidJSON is wrapped by the error Map returns for a body that is not
// valid JSON (when the mapping reads the body as JSON).
var ErrInvalidJSON = errors.New("invalid JSON body")

// maxDepth bounds the nesting of a body, so that a hostile body cannot make
// the scanner recurse without limit.
const maxDepth = 512

// node is a step in the trie of the mapping's JSON paths. The scanner walks
// the body once and follows the trie; subtrees no column asks for are
// skipped (but still validated).
type node struct {
	keys    map[string]*node
	small   []keyChild // the keys as a list, used instead of the map when short
	indexes []indexChild
	cols    []int // columns whose value is the value at this node
	// explode, at the node of an exploded path, is the trie of the
	// columns, applied to each element of the array found here.
	explode *node
}

type keyChild struct {
	key   string
	child *node
}

// smallKeys is the most keys looked up by a linear scan: comparing a few
// short strings beats hashing the key.
const smallKeys = 8

// child returns the child for an object key, or nil.
func (n *node) child(key []byte) *node {
	if n.small != nil {
		for i := range n.small {
			if n.small[i].key == string(key) {
				return n.small[i].child
			}
		}
		return nil
	}
	return n.keys[string(key)]
}

type indexChild struct {
	index int
	child *node
}

func (n *node) add(path []Step, col int) {
	n = n.at(path)
	n.cols = append(n.cols, col)
}

// Kinds of JSON values found by the scanner.
const (
	jMissing byte = 0
	jString  byte = '"'
	jNumber  byte = '0'
	jTrue    byte = 't'
	jFalse   byte = 'f'
	jNull    byte = 'n'
	jObject  byte = '{'
	jArray   byte = '['
)

// span locates the value of one column in the body.
type span struct {
	start, end int  // the raw JSON text of the value is data[start:end]
	kind       byte // jMissing when the path is absent
	escaped    bool // a string with backslash escapes
}

// scanner is the per-call state of one body scan. Mappers pool them, so a
// scan allocates nothing in the steady state.
type scanner struct {
	data  []byte
	pos   int
	depth int
	spans []span
	buf   []byte // scratch for unescaped keys and strings
	dig   []byte // scratch for decimal digits
	num   []byte // scratch for formatted numbers
	// Exploded scans: the spans of element k are all[k*ncols:(k+1)*ncols].
	ncols  int
	all    []span
	nElems int
	exKind byte // kind of the value at the exploded path
	index  int  // the element being mapped (@index)
	rows   Rows // handed out by Mapper.Rows, so that it allocates nothing
}

func (s *scanner) fail(msg string) error {
	return fmt.Errorf("%w at offset %d: %s", ErrInvalidJSON, s.pos, msg)
}

// scan validates data as one JSON value and records the spans of the
// columns in the trie rooted at root.
func (s *scanner) scan(data []byte, root *node, ncols int) error {
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

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) value(n *node) error {
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
func (s *scanner) element(cols *node) *node {
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

func (s *scanner) object(n *node) error {
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
			child = n.child(key)
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

func (s *scanner) array(n *node) error {
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
func (s *scanner) str() (escaped bool, err error) {
	start := s.pos
	s.pos++
	ascii := true
	for s.pos < len(s.data) {
		for s.pos < len(s.data) && plainByte(s.data[s.pos]) {
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

// plainByte reports whether a string scan can pass c without a second
// look: printable ASCII other than the quote and the backslash.
func plainByte(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

func (s *scanner) literal(lit string) error {
	if len(s.data)-s.pos < len(lit) || string(s.data[s.pos:s.pos+len(lit)]) != lit {
		return s.fail("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) number() error {
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

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// unescape appends the content of a JSON string (between the quotes,
// already validated by the scanner) to dst with escapes resolved. Lone
// surrogates become U+FFFD, as encoding/json does.
func unescape(dst, src []byte) []byte {
	for i := 0; i < len(src); {
		c := src[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch src[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(src[i+2:])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(src) && src[i] == '\\' && src[i+1] == 'u' {
					if r2 := utf16.DecodeRune(r, hex4(src[i+2:])); r2 != utf8.RuneError {
						dst = utf8.AppendRune(dst, r2)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // " \ /
			dst = append(dst, src[i+1])
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// at returns the node at path, creating the nodes on the way.
func (n *node) at(path []Step) *node {
	for _, st := range path {
		var next *node
		if st.Index >= 0 {
			for _, ic := range n.indexes {
				if ic.index == st.Index {
					next = ic.child
				}
			}
			if next == nil {
				next = &node{}
				n.indexes = append(n.indexes, indexChild{st.Index, next})
			}
		} else {
			next = n.keys[st.Key]
			if next == nil {
				if n.keys == nil {
					n.keys = make(map[string]*node)
				}
				next = &node{}
				n.keys[st.Key] = next
				n.small = nil
				if len(n.keys) <= smallKeys {
					for k, c := range n.keys {
						n.small = append(n.small, keyChild{k, c})
					}
				}
			}
		}
		n = next
	}
	return n
}
