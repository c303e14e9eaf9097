package expr

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// condKind is the kind of a node of a condition.
type condKind uint8

const (
	cAnd condKind = iota
	cOr
	cNot
	cConst  // true, false
	cCmp    // operand op operand
	cIn     // operand in [literals]
	cMatch  // operand =~ 'regexp'
	cExists // exists(operand)
)

type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var cmpOps = map[string]cmpOp{"==": opEq, "!=": opNe, "<": opLt, "<=": opLe, ">": opGt, ">=": opGe}

func (o cmpOp) ordering() bool { return o >= opLt }

// String returns the operator as written.
func (o cmpOp) String() string {
	for text, op := range cmpOps {
		if op == o {
			return text
		}
	}
	return "?"
}

// cond is one node of a compiled condition.
type cond struct {
	kind        condKind
	kids        []*cond // and, or (two or more), not (one)
	val         bool    // const
	op          cmpOp
	left, right *operand
	list        []*operand // in: literals
	re          *regexp.Regexp
}

// opndKind is where an operand's value comes from.
type opndKind uint8

const (
	oLiteral opndKind = iota
	oPath             // a JSON path; index into the expression's path set
	oMeta             // event metadata
)

// operand is one side of a comparison, or a piece of a template.
type operand struct {
	kind opndKind
	src  mapping.Source // oPath, oMeta
	path int            // oPath: index in the path set
	lit  value          // oLiteral
	text string         // as written
	pos  int
}

// staticKind is what compile time knows of an operand's kind: a literal's
// kind, the kind of typed metadata, or vMissing for "any".
func (o *operand) staticKind() vkind {
	switch o.kind {
	case oLiteral:
		return o.lit.kind
	case oMeta:
		switch o.src.Kind {
		case mapping.SourcePartition, mapping.SourceOffset, mapping.SourceBody:
			return vString
		case mapping.SourceSequenceNumber:
			return vNumber
		case mapping.SourceEnqueuedTime:
			return vTime
		}
	}
	return vMissing
}

// nullable reports whether the operand can be null or missing at run time.
func (o *operand) nullable() bool {
	switch o.kind {
	case oLiteral:
		return o.lit.kind == vNull
	case oMeta:
		switch o.src.Kind {
		case mapping.SourcePartitionKey, mapping.SourceContentType, mapping.SourceProperty:
			return true
		}
		return false
	}
	return true
}

// parser builds a condition from tokens, collecting the JSON paths it
// reads.
type parser struct {
	lx    lexer
	tok   token
	paths [][]mapping.Step
	index map[string]int // path as written (canonical) -> index in paths
	depth int
}

// maxDepth bounds the nesting of an expression.
const maxDepth = 100

func newParser(src string) *parser {
	return &parser{lx: lexer{src: src}, index: map[string]int{}}
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errf(pos int, format string, args ...any) error {
	return errAt(p.lx.src, pos, format, args...)
}

func (p *parser) word(w string) bool { return p.tok.kind == tWord && p.tok.text == w }

// parseOr: and { "or" and }
func (p *parser) parseOr() (*cond, error) { return p.parseJoined("or", cOr, p.parseAnd) }

// parseAnd: unary { "and" unary }
func (p *parser) parseAnd() (*cond, error) { return p.parseJoined("and", cAnd, p.parseUnary) }

// parseJoined parses operands of sub joined by the keyword word.
func (p *parser) parseJoined(word string, kind condKind, sub func() (*cond, error)) (*cond, error) {
	first, err := sub()
	if err != nil {
		return nil, err
	}
	kids := []*cond{first}
	for p.word(word) {
		if err := p.advance(); err != nil {
			return nil, err
		}
		c, err := sub()
		if err != nil {
			return nil, err
		}
		kids = append(kids, c)
	}
	if len(kids) == 1 {
		return first, nil
	}
	return &cond{kind: kind, kids: kids}, nil
}

// parseUnary: "not" unary | primary
func (p *parser) parseUnary() (*cond, error) {
	if p.depth++; p.depth > maxDepth {
		return nil, p.errf(p.tok.pos, "expression nested too deep")
	}
	defer func() { p.depth-- }()
	if p.word("not") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		c, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &cond{kind: cNot, kids: []*cond{c}}, nil
	}
	return p.parsePrimary()
}

// parsePrimary: "(" or ")" | "exists" "(" operand ")" | "true" | "false" | comparison
func (p *parser) parsePrimary() (*cond, error) {
	t := p.tok
	switch {
	case t.kind == tLParen:
		if err := p.advance(); err != nil {
			return nil, err
		}
		c, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) to close the ( at column %d, found %s", errAt(p.lx.src, t.pos, "").Column, p.tok.describe())
		}
		return c, p.advance()
	case p.word("exists"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tLParen {
			return nil, p.errf(p.tok.pos, "expected ( after exists")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		o, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if !o.nullable() || o.kind == oLiteral {
			return nil, p.errf(o.pos, "exists(%s) is always true: exists takes a JSON path, @properties.NAME, @partition_key or @content_type", o.text)
		}
		if p.tok.kind != tRParen {
			return nil, p.errf(p.tok.pos, "expected ) after exists(%s", o.text)
		}
		return &cond{kind: cExists, left: o}, p.advance()
	case t.kind == tWord && (t.text == "true" || t.text == "false"):
		// A lone boolean is a constant condition; a boolean compared to
		// something is a comparison.
		save := *p
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tOp && !p.word("in") && !p.word("not") {
			return &cond{kind: cConst, val: t.text == "true"}, nil
		}
		*p = save
	}
	return p.parseComparison()
}

// parseComparison: operand ( op operand | ["not"] "in" "[" literal {"," literal} "]" | "=~" string )
func (p *parser) parseComparison() (*cond, error) {
	left, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	t := p.tok
	switch {
	case t.kind == tOp && t.text == "=~":
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tString {
			return nil, p.errf(p.tok.pos, "expected a quoted regular expression after =~, found %s", p.tok.describe())
		}
		re, err := regexp.Compile(p.tok.text)
		if err != nil {
			return nil, p.errf(p.tok.pos, "invalid regular expression: %s", reError(err))
		}
		if left.kind == oLiteral {
			return nil, p.errf(left.pos, "the left side of =~ must read the event (a JSON path or @metadata), not a literal")
		}
		if k := left.staticKind(); k != vMissing && k != vString {
			return nil, p.errf(left.pos, "%s is a %s; =~ matches strings", left.text, k)
		}
		return &cond{kind: cMatch, left: left, re: re}, p.advance()
	case t.kind == tOp:
		op := cmpOps[t.text]
		if err := p.advance(); err != nil {
			return nil, err
		}
		right, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if err := p.check(left, op, right); err != nil {
			return nil, err
		}
		return &cond{kind: cCmp, left: left, op: op, right: right}, nil
	case p.word("in"), p.word("not"):
		negate := p.word("not")
		if negate {
			if err := p.advance(); err != nil {
				return nil, err
			}
			if !p.word("in") {
				return nil, p.errf(p.tok.pos, "expected in after not, found %s", p.tok.describe())
			}
		}
		c, err := p.parseIn(left)
		if err != nil {
			return nil, err
		}
		if negate {
			return &cond{kind: cNot, kids: []*cond{c}}, nil
		}
		return c, nil
	}
	if t.kind == tEOF {
		return nil, p.errf(t.pos, "expected operator after %s (a condition compares: ==, !=, <, <=, >, >=, in, =~)", left.text)
	}
	return nil, p.errf(t.pos, "expected operator after %s, found %s", left.text, t.describe())
}

// parseIn parses "in [literal, ...]", the current token being "in".
func (p *parser) parseIn(left *operand) (*cond, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind != tLBrack {
		return nil, p.errf(p.tok.pos, "expected [ after in, found %s", p.tok.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if left.kind == oLiteral {
		return nil, p.errf(left.pos, "%s in [...] compares literals; the left side must read the event", left.text)
	}
	var list []*operand
	for {
		o, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if o.kind != oLiteral {
			return nil, p.errf(o.pos, "the list of in holds literals only, found %s", o.text)
		}
		if err := p.check(left, opEq, o); err != nil {
			return nil, err
		}
		list = append(list, o)
		switch p.tok.kind {
		case tComma:
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		case tRBrack:
			return &cond{kind: cIn, left: left, list: list}, p.advance()
		}
		return nil, p.errf(p.tok.pos, "expected , or ] in the list of in, found %s", p.tok.describe())
	}
}

// check rejects comparisons that can never be true or make no sense, and
// turns a string literal compared with a timestamp into a timestamp.
func (p *parser) check(left *operand, op cmpOp, right *operand) error {
	if left.kind == oLiteral && right.kind == oLiteral {
		return p.errf(left.pos, "%s %s %s compares two literals; one side must read the event", left.text, op, right.text)
	}
	for _, pair := range [2][2]*operand{{left, right}, {right, left}} {
		o, lit := pair[0], pair[1]
		if lit.kind != oLiteral {
			continue
		}
		if lit.lit.kind == vNull {
			if op.ordering() {
				return p.errf(lit.pos, "null cannot be ordered; use == null or != null")
			}
			if !o.nullable() {
				return p.errf(o.pos, "%s is never null", o.text)
			}
			continue
		}
		if op.ordering() && lit.lit.kind == vBool {
			return p.errf(lit.pos, "booleans cannot be ordered; use == or !=")
		}
		k := o.staticKind()
		switch {
		case k == vMissing || k == lit.lit.kind:
		case k == vTime && lit.lit.kind == vString:
			t, err := time.Parse(time.RFC3339Nano, lit.lit.str())
			if err != nil {
				return p.errf(lit.pos, "%s is compared with the timestamp %s and is not an RFC 3339 timestamp (such as '2024-05-01T00:00:00Z')", lit.text, o.text)
			}
			lit.lit = value{kind: vTime, t: t}
		default:
			hint := ""
			if k == vString && lit.lit.kind == vNumber {
				hint = fmt.Sprintf(" (write '%s' to compare as a string)", lit.text)
			}
			return p.errf(lit.pos, "%s is a %s and %s a %s: they never compare%s", o.text, k, lit.text, lit.lit.kind, hint)
		}
	}
	return nil
}

// parseOperand: path | @metadata | string | number | true | false | null
func (p *parser) parseOperand() (*operand, error) {
	t := p.tok
	o := &operand{text: t.text, pos: t.pos}
	switch t.kind {
	case tPath:
		src, err := mapping.ParseSource(t.text)
		if err != nil {
			return nil, p.errf(t.pos, "%s", pathError(err))
		}
		o.kind, o.src = oPath, src
		key := src.String()
		i, ok := p.index[key]
		if !ok {
			i = len(p.paths)
			p.index[key] = i
			p.paths = append(p.paths, src.Path)
		}
		o.path = i
	case tMeta:
		src, err := mapping.ParseSource(t.text)
		if err != nil && strings.HasPrefix(t.text, "@properties.") {
			return nil, p.errf(t.pos, "%s", err)
		}
		if err != nil {
			// The mapping's message lists @index, which a condition refuses.
			return nil, p.errf(t.pos, "unknown metadata %s (want %s)", t.text, conditionMeta)
		}
		if src.Kind == mapping.SourceJSON || !metaAllowed(src.Kind) {
			return nil, p.errf(t.pos, "%s is not available in a condition (want %s)", t.text, conditionMeta)
		}
		o.kind, o.src = oMeta, src
	case tString:
		o.kind, o.lit = oLiteral, value{kind: vString, s: []byte(t.text)}
		o.text = p.lx.src[t.pos:t.end]
	case tNumber:
		v, ok := parseNumber(t.text)
		if !ok {
			return nil, p.errf(t.pos, "invalid number %s", t.text)
		}
		o.kind, o.lit = oLiteral, v
	case tWord:
		switch t.text {
		case "true", "false":
			o.kind, o.lit = oLiteral, value{kind: vBool, b: t.text == "true"}
		case "null":
			o.kind, o.lit = oLiteral, value{kind: vNull}
		default:
			return nil, p.errf(t.pos, "unexpected %s: expected a JSON path ($.field), @metadata or a literal", t.text)
		}
	case tEOF:
		return nil, p.errf(t.pos, "unexpected end of expression: expected a JSON path ($.field), @metadata or a literal")
	default:
		return nil, p.errf(t.pos, "unexpected %s: expected a JSON path ($.field), @metadata or a literal", t.describe())
	}
	return o, p.advance()
}

// conditionMeta lists the metadata a condition reads, for messages.
const conditionMeta = "@partition, @sequence_number, @offset, @enqueued_time, @partition_key, @content_type, @properties.NAME or @body"

// metaAllowed reports whether a metadata source is known before a mapping
// runs (not @index, the position of an exploded element).
func metaAllowed(k mapping.SourceKind) bool {
	switch k {
	case mapping.SourcePartition, mapping.SourceSequenceNumber, mapping.SourceOffset, mapping.SourceEnqueuedTime,
		mapping.SourcePartitionKey, mapping.SourceContentType, mapping.SourceProperty, mapping.SourceBody:
		return true
	}
	return false
}

// pathError strips the mapping's `path "..."` prefix: the column already
// says where.
func pathError(err error) string {
	s := err.Error()
	if i := strings.Index(s, ": "); strings.HasPrefix(s, "path ") && i > 0 {
		return "invalid path " + s[len("path "):i] + ": " + s[i+2:]
	}
	return s
}

// reError shortens regexp's error text ("error parsing regexp: ...").
func reError(err error) string {
	var se *syntax.Error
	if errors.As(err, &se) {
		return string(se.Code) + ": " + strconv.Quote(se.Expr)
	}
	return err.Error()
}

// parseNumber parses a number literal: an int64 when it is an integer
// that fits, otherwise a float64.
func parseNumber(text string) (value, bool) {
	if i, err := strconv.ParseInt(text, 10, 64); err == nil {
		return value{kind: vNumber, isInt: true, i: i, f: float64(i)}, true
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return value{}, false
	}
	return value{kind: vNumber, f: f}, true
}
