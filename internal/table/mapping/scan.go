package mapping

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
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
	keys  map[string]*node
	small []keyChild // the keys as a list, used instead of the map when short
	// lens has the lenBit of each key: most keys of a body are not in
	// the trie, and most of those differ in length from every key that is.
	lens    uint64
	indexes []indexChild
	cols    []int // columns whose value is the value at this node
	// explode, at the node of an exploded path, is the trie of the
	// columns, applied to each element of the array found here.
	explode *node
}

type keyChild struct {
	key   string
	head  uint64 // keyHead(key): most keys differ there, without a compare of strings
	child *node
}

// keyHead returns the first eight bytes of key, little-endian, padded with
// zeros.
func keyHead[B []byte | string](key B) uint64 {
	if len(key) >= 8 {
		return uint64(key[0]) | uint64(key[1])<<8 | uint64(key[2])<<16 | uint64(key[3])<<24 |
			uint64(key[4])<<32 | uint64(key[5])<<40 | uint64(key[6])<<48 | uint64(key[7])<<56
	}
	var h uint64
	for i := len(key) - 1; i >= 0; i-- {
		h = h<<8 | uint64(key[i])
	}
	return h
}

// smallKeys is the most keys looked up by a linear scan: comparing a few
// short strings beats hashing the key.
const smallKeys = 8

// child returns the child for an object key, or nil.
func (n *node) child(key []byte) *node {
	if n.lens&lenBit(len(key)) == 0 {
		return nil
	}
	if n.small != nil {
		h := keyHead(key)
		for i := range n.small {
			if kc := &n.small[i]; kc.head == h && len(kc.key) == len(key) && (len(key) <= 8 || kc.key[8:] == string(key[8:])) {
				return kc.child
			}
		}
		return nil
	}
	return n.keys[string(key)]
}

// lenBit is the bit of node.lens for a key of n bytes.
func lenBit(n int) uint64 { return 1 << min(n, 63) }

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
	depth int
	spans []span
	buf   []byte // scratch for unescaped keys and strings
	dig   []byte // scratch for decimal digits
	num   []byte // scratch for formatted numbers
	// Exploded scans: the spans of element k are all[k*ncols:(k+1)*ncols].
	ncols  int
	all    []span
	nElems int
	exKind byte    // kind of the value at the exploded path
	index  int     // the element being mapped (@index)
	rows   Rows    // handed out by Mapper.Rows, so that it allocates nothing
	boxes  []boxed // per column of a Mapper, the last value (Mapper.value)
}

// The scanning methods take the offset of what they scan and return the
// offset past it: the offset lives in a register, not in the scanner, in
// the loops that touch every byte.

func (s *scanner) fail(pos int, msg string) error {
	return fmt.Errorf("%w at offset %d: %s", ErrInvalidJSON, pos, msg)
}

// scan validates data as one JSON value and records the spans of the
// columns in the trie rooted at root.
func (s *scanner) scan(data []byte, root *node, ncols int) error {
	s.data, s.depth = data, 0
	s.ncols, s.nElems, s.exKind, s.index = ncols, 0, jMissing, 0
	s.all = s.all[:0]
	if cap(s.spans) < ncols {
		s.spans = make([]span, ncols)
	}
	s.spans = s.spans[:ncols]
	clear(s.spans)
	pos := ws(data, 0)
	if pos >= len(data) {
		return s.fail(pos, "empty body")
	}
	pos, err := s.value(root, pos)
	if err != nil {
		return err
	}
	if pos = ws(data, pos); pos != len(data) {
		return s.fail(pos, "data after the JSON value")
	}
	return nil
}

// ws returns the offset of the first byte at or after pos that is not
// JSON whitespace.
func ws(d []byte, pos int) int {
	for pos < len(d) && d[pos] <= ' ' && (d[pos] == ' ' || d[pos] == '\n' || d[pos] == '\r' || d[pos] == '\t') {
		pos++
	}
	return pos
}

// value scans the value at data[pos], which must exist.
func (s *scanner) value(n *node, pos int) (int, error) {
	d := s.data
	if pos >= len(d) {
		return pos, s.fail(pos, "unexpected end of input")
	}
	start := pos
	var kind byte
	escaped := false
	var err error
	switch c := d[pos]; c {
	case '"':
		kind = jString
		// Most strings are plain to the closing quote; str does the rest.
		if e := plainEnd(d, pos+1); e < len(d) && d[e] == '"' {
			pos = e + 1
		} else {
			pos, escaped, err = s.str(pos)
		}
	case '{':
		kind = jObject
		pos, err = s.object(n, pos)
	case '[':
		kind = jArray
		pos, err = s.array(n, pos)
	case 't':
		kind = jTrue
		pos, err = s.literal(pos, "true")
	case 'f':
		kind = jFalse
		pos, err = s.literal(pos, "false")
	case 'n':
		kind = jNull
		pos, err = s.literal(pos, "null")
	default:
		if c != '-' && (c < '0' || c > '9') {
			return pos, s.fail(pos, fmt.Sprintf("unexpected %q", c))
		}
		kind = jNumber
		pos, err = s.number(pos)
	}
	if err != nil {
		return pos, err
	}
	if n != nil {
		for _, col := range n.cols {
			s.spans[col] = span{start: start, end: pos, kind: kind, escaped: escaped}
		}
		if n.explode != nil {
			s.exKind = kind
		}
	}
	return pos, nil
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

func (s *scanner) object(n *node, pos int) (int, error) {
	if s.depth++; s.depth > maxDepth {
		return pos, s.fail(pos, "nesting too deep")
	}
	d := s.data
	pos = ws(d, pos+1) // past {
	if pos < len(d) && d[pos] == '}' {
		s.depth--
		return pos + 1, nil
	}
	lookup := n != nil && n.keys != nil
	for {
		if pos >= len(d) || d[pos] != '"' {
			return pos, s.fail(pos, "want an object key")
		}
		kstart := pos + 1
		escaped := false
		var err error
		if e := plainEnd(d, kstart); e < len(d) && d[e] == '"' {
			pos = e + 1
		} else if pos, escaped, err = s.str(pos); err != nil {
			return pos, err
		}
		var child *node
		if lookup {
			key := d[kstart : pos-1]
			if escaped {
				s.buf = unescape(s.buf[:0], key)
				key = s.buf
			}
			child = n.child(key)
		}
		if pos < len(d) && d[pos] == ':' {
			pos++ // the common case: no space before the colon
		} else {
			if pos = ws(d, pos); pos >= len(d) || d[pos] != ':' {
				return pos, s.fail(pos, "want : after an object key")
			}
			pos++
		}
		if pos, err = s.value(child, ws(d, pos)); err != nil {
			return pos, err
		}
		if pos = ws(d, pos); pos >= len(d) {
			return pos, s.fail(pos, "unterminated object")
		}
		switch d[pos] {
		case ',':
			pos = ws(d, pos+1)
		case '}':
			s.depth--
			return pos + 1, nil
		default:
			return pos, s.fail(pos, "want , or } in an object")
		}
	}
}

func (s *scanner) array(n *node, pos int) (int, error) {
	if s.depth++; s.depth > maxDepth {
		return pos, s.fail(pos, "nesting too deep")
	}
	d := s.data
	pos = ws(d, pos+1) // past [
	if pos < len(d) && d[pos] == ']' {
		s.depth--
		return pos + 1, nil
	}
	// The elements of an exploded array are scanned with the columns'
	// trie, each into spans of its own.
	exploded := n != nil && n.explode != nil
	indexed := n != nil && len(n.indexes) > 0
	outer := s.spans
	for i := 0; ; i++ {
		var child *node
		if exploded {
			child = s.element(n.explode)
		} else if indexed {
			for _, ic := range n.indexes {
				if ic.index == i {
					child = ic.child
				}
			}
		}
		var err error
		if pos, err = s.value(child, pos); err != nil {
			return pos, err
		}
		if pos = ws(d, pos); pos >= len(d) {
			return pos, s.fail(pos, "unterminated array")
		}
		switch d[pos] {
		case ',':
			pos = ws(d, pos+1)
		case ']':
			s.depth--
			s.spans = outer
			return pos + 1, nil
		default:
			return pos, s.fail(pos, "want , or ] in an array")
		}
	}
}

// plain marks the bytes a string scan passes without a second look:
// printable ASCII other than the quote and the backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const (
	lsb = 0x0101010101010101 // the low bit of each byte of a word
	msb = 0x8080808080808080 // the high bit of each byte of a word
)

// special returns the high bits of the bytes of x (eight bytes of a
// string, little-endian) that are not plain. The lowest bit set is exact,
// so it gives the offset of the first such byte; bits above it may be
// spurious (borrows), which a scan stopping at the first never sees.
func special(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return ((q-lsb)&^q | (b-lsb)&^b | (x-lsb*0x20)&^x | x) & msb
}

// plainEnd returns the offset of the first byte at or after pos that is
// not plain: eight bytes at a time, then the rest one table lookup per
// byte.
func plainEnd(d []byte, pos int) int {
	for pos+8 <= len(d) {
		if m := special(binary.LittleEndian.Uint64(d[pos:])); m != 0 {
			return pos + bits.TrailingZeros64(m)>>3
		}
		pos += 8
	}
	for pos < len(d) && plain[d[pos]] {
		pos++
	}
	return pos
}

// str scans a string starting at its opening quote, validating escapes
// and UTF-8, and reports whether it has escapes.
func (s *scanner) str(pos int) (end int, escaped bool, err error) {
	d := s.data
	start := pos
	pos++
	ascii := true
	for {
		if pos = plainEnd(d, pos); pos >= len(d) {
			return pos, false, s.fail(pos, "unterminated string")
		}
		switch c := d[pos]; {
		case c == '"':
			pos++
			if !ascii && !utf8.Valid(d[start:pos]) {
				return pos, false, s.fail(start, "string is not valid UTF-8")
			}
			return pos, escaped, nil
		case c == '\\':
			escaped = true
			if pos+1 >= len(d) {
				return pos, false, s.fail(pos, "unterminated escape")
			}
			switch d[pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				pos += 2
			case 'u':
				if pos+6 > len(d) {
					return pos, false, s.fail(pos, "short \\u escape")
				}
				for _, h := range d[pos+2 : pos+6] {
					if hexVal(h) < 0 {
						return pos, false, s.fail(pos, "invalid \\u escape")
					}
				}
				pos += 6
			default:
				return pos, false, s.fail(pos, "invalid escape")
			}
		case c < 0x20:
			return pos, false, s.fail(pos, "control character in string")
		default: // >= 0x80: checked as UTF-8 at the end
			ascii = false
			for pos++; pos < len(d) && d[pos] >= 0x80; pos++ {
			}
		}
	}
}

func (s *scanner) literal(pos int, lit string) (int, error) {
	if len(s.data)-pos < len(lit) || string(s.data[pos:pos+len(lit)]) != lit {
		return pos, s.fail(pos, "invalid literal")
	}
	return pos + len(lit), nil
}

// digits returns the offset of the first byte at or after pos that is not
// a decimal digit.
func digits(d []byte, pos int) int {
	for pos < len(d) && d[pos]-'0' <= 9 {
		pos++
	}
	return pos
}

func (s *scanner) number(pos int) (int, error) {
	d := s.data
	if d[pos] == '-' {
		pos++
	}
	switch {
	case pos < len(d) && d[pos] == '0':
		pos++
	case pos < len(d) && d[pos] >= '1' && d[pos] <= '9':
		pos = digits(d, pos+1)
	default:
		return pos, s.fail(pos, "invalid number")
	}
	if pos < len(d) && d[pos] == '.' {
		pos++
		if pos >= len(d) || d[pos]-'0' > 9 {
			return pos, s.fail(pos, "invalid number")
		}
		pos = digits(d, pos+1)
	}
	if pos < len(d) && (d[pos] == 'e' || d[pos] == 'E') {
		pos++
		if pos < len(d) && (d[pos] == '+' || d[pos] == '-') {
			pos++
		}
		if pos >= len(d) || d[pos]-'0' > 9 {
			return pos, s.fail(pos, "invalid number")
		}
		pos = digits(d, pos+1)
	}
	return pos, nil
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
				n.lens |= lenBit(len(st.Key))
				n.small = nil
				if len(n.keys) <= smallKeys {
					for k, c := range n.keys {
						n.small = append(n.small, keyChild{k, keyHead(k), c})
					}
				}
			}
		}
		n = next
	}
	return n
}
