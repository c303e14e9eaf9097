package expr

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// SyntaxError is a problem found in an expression or template when it is
// compiled: what is wrong and where.
type SyntaxError struct {
	// Column is the 1-based position (in characters) in the source text.
	Column int
	// Msg says what is wrong, such as "expected operator after $.type".
	Msg string
}

// Error returns "column N: msg".
func (e *SyntaxError) Error() string { return "column " + strconv.Itoa(e.Column) + ": " + e.Msg }

// errAt builds the error for byte offset pos of src.
func errAt(src string, pos int, format string, args ...any) *SyntaxError {
	pos = min(max(pos, 0), len(src))
	return &SyntaxError{Column: utf8.RuneCountInString(src[:pos]) + 1, Msg: fmt.Sprintf(format, args...)}
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tPath
	tMeta
	tString
	tNumber
	tWord // and, or, not, in, exists, true, false, null
	tOp   // == != < <= > >= =~
	tLParen
	tRParen
	tLBrack
	tRBrack
	tComma
	tRBrace // } (ends an operand in a template)
)

type token struct {
	kind tokKind
	text string // as written (for strings: the content, escapes resolved)
	pos  int    // byte offset in the source
	end  int
}

// describe names a token for an error message.
func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tString:
		return "string " + strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

// lexer splits an expression into tokens.
type lexer struct {
	src string
	pos int
}

// delim reports whether c ends a key of a JSON path or a metadata name.
func delim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', '(', ')', ',', '[', ']', '=', '!', '<', '>', '\'', '"', '{', '}':
		return true
	}
	return false
}

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) && strings.IndexByte(" \t\r\n", l.src[l.pos]) >= 0 {
		l.pos++
	}
	start := l.pos
	if l.pos >= len(l.src) {
		return token{kind: tEOF, pos: start, end: start}, nil
	}
	tok := func(k tokKind, n int) (token, error) {
		l.pos += n
		return token{kind: k, text: l.src[start:l.pos], pos: start, end: l.pos}, nil
	}
	c := l.src[l.pos]
	switch {
	case c == '(':
		return tok(tLParen, 1)
	case c == ')':
		return tok(tRParen, 1)
	case c == '[':
		return tok(tLBrack, 1)
	case c == ']':
		return tok(tRBrack, 1)
	case c == ',':
		return tok(tComma, 1)
	case c == '}':
		return tok(tRBrace, 1)
	case c == '=' || c == '!' || c == '<' || c == '>':
		two := ""
		if l.pos+1 < len(l.src) {
			two = l.src[l.pos : l.pos+2]
		}
		switch two {
		case "==", "!=", "<=", ">=", "=~":
			return tok(tOp, 2)
		}
		if c == '<' || c == '>' {
			return tok(tOp, 1)
		}
		if c == '=' {
			return token{}, errAt(l.src, start, "unexpected = (use == to compare)")
		}
		return token{}, errAt(l.src, start, "unexpected ! (use not, or != to compare)")
	case c == '\'' || c == '"':
		return l.str(c)
	case c == '-' || (c >= '0' && c <= '9'):
		return l.number()
	case c == '$':
		return l.path()
	case c == '@':
		l.pos++
		for l.pos < len(l.src) && !delim(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tMeta, text: l.src[start:l.pos], pos: start, end: l.pos}, nil
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_':
		for l.pos < len(l.src) && (isWordByte(l.src[l.pos])) {
			l.pos++
		}
		return token{kind: tWord, text: l.src[start:l.pos], pos: start, end: l.pos}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	return token{}, errAt(l.src, start, "unexpected %q", r)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// str scans a quoted string. A backslash escapes the quote and the
// backslash; any other backslash is kept as written, so that regular
// expressions read as they do elsewhere ('^\d+$').
func (l *lexer) str(q byte) (token, error) {
	start := l.pos
	l.pos++
	var b strings.Builder
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			return token{kind: tString, text: b.String(), pos: start, end: l.pos}, nil
		case c == '\\' && l.pos+1 < len(l.src) && (l.src[l.pos+1] == q || l.src[l.pos+1] == '\\'):
			b.WriteByte(l.src[l.pos+1])
			l.pos += 2
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
	return token{}, errAt(l.src, start, "unterminated string")
}

// number scans a number the way JSON writes it.
func (l *lexer) number() (token, error) {
	start := l.pos
	s := l.src
	digits := func() int {
		n := 0
		for l.pos < len(s) && s[l.pos] >= '0' && s[l.pos] <= '9' {
			l.pos++
			n++
		}
		return n
	}
	if s[l.pos] == '-' {
		l.pos++
	}
	if digits() == 0 {
		return token{}, errAt(s, start, "invalid number")
	}
	if l.pos < len(s) && s[l.pos] == '.' {
		l.pos++
		if digits() == 0 {
			return token{}, errAt(s, start, "invalid number")
		}
	}
	if l.pos < len(s) && (s[l.pos] == 'e' || s[l.pos] == 'E') {
		l.pos++
		if l.pos < len(s) && (s[l.pos] == '+' || s[l.pos] == '-') {
			l.pos++
		}
		if digits() == 0 {
			return token{}, errAt(s, start, "invalid number")
		}
	}
	if l.pos < len(s) && !delim(s[l.pos]) {
		return token{}, errAt(s, start, "invalid number %q", s[start:l.pos+1])
	}
	return token{kind: tNumber, text: s[start:l.pos], pos: start, end: l.pos}, nil
}

// path scans the extent of a JSON path ($, $.a.b, $.a[0], $['a b']); the
// mapping's parser then reads it.
func (l *lexer) path() (token, error) {
	start := l.pos
	s := l.src
	l.pos++ // $
	for l.pos < len(s) {
		switch s[l.pos] {
		case '.':
			l.pos++
			for l.pos < len(s) && !delim(s[l.pos]) && s[l.pos] != '.' {
				l.pos++
			}
			continue
		case '[':
			if l.pos+1 < len(s) && (s[l.pos+1] == '\'' || s[l.pos+1] == '"') {
				_, end, ok := mapping.QuotedKey(s, l.pos+1)
				if !ok {
					return token{}, errAt(s, l.pos, "unterminated quoted key in path")
				}
				l.pos = end
				if l.pos >= len(s) || s[l.pos] != ']' {
					return token{}, errAt(s, l.pos, "expected ] after a quoted key in path")
				}
				l.pos++
				continue
			}
			end := strings.IndexByte(s[l.pos:], ']')
			if end < 0 {
				return token{}, errAt(s, l.pos, "missing ] in path")
			}
			l.pos += end + 1
			continue
		}
		break
	}
	return token{kind: tPath, text: s[start:l.pos], pos: start, end: l.pos}, nil
}
