package expr

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func ptr[T any](v T) *T { return &v }

func testEvent(body string) *sinks.Event {
	return &sinks.Event{
		Partition:      "3",
		SequenceNumber: 42,
		Offset:         "4096",
		EnqueuedTime:   time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		PartitionKey:   ptr("customer-7"),
		Properties:     map[string]any{"type": "order", "version": int32(2), "ratio": 0.5, "flag": true, "nil": nil, "at": time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)},
		Body:           []byte(body),
	}
}

const body = `{"type":"order_created","amount":12.5,"count":3,"big":9007199254740993,"ok":true,"none":null,` +
	`"customer":{"id":"c-1","tier":"gold"},"items":[{"sku":"A"},{"sku":"B"}],"esc":"a\"b\u00e9","ts":"2024-05-01T11:00:00Z","n":"7","key with space":"x","we'ird":"w","back\\slash":"b"}`

func TestEval(t *testing.T) {
	tests := []struct {
		cond string
		want bool
	}{
		{`$.type == 'order_created'`, true},
		{`$.type == "order_created"`, true},
		{`$.type != 'order_created'`, false},
		{`$.type != 'heartbeat'`, true},
		{`$.missing != 'heartbeat'`, true},
		{`$.missing == 'heartbeat'`, false},
		{`$.missing == null`, false},
		{`$.none == null`, true},
		{`$.none != null`, false},
		{`$.type == null`, false},
		{`exists($.none)`, true},
		{`exists($.missing)`, false},
		{`exists($.customer.id)`, true},
		{`not exists($.customer.name)`, true},
		{`$.amount > 12`, true},
		{`$.amount >= 12.5`, true},
		{`$.amount < 12.5`, false},
		{`$.count == 3.0`, true},
		{`$.count == 3`, true},
		{`$.big == 9007199254740993`, true},
		{`$.big == 9007199254740992`, false},
		{`$.n == 7`, false},
		{`$.n == '7'`, true},
		{`$.n > 5`, false},
		{`$.missing < 5`, false},
		{`$.missing >= 5`, false},
		{`$.ok == true`, true},
		{`$.ok != false`, true},
		{`$.customer == 'x'`, false},
		{`$.customer != 'x'`, true},
		{`$.customer.tier in ['gold', 'platinum']`, true},
		{`$.customer.tier not in ['gold', 'platinum']`, false},
		{`$.count in [1, 2, 3]`, true},
		{`$.missing in [1, 2, 3]`, false},
		{`$.items[1].sku == 'B'`, true},
		{`$.items[2].sku == 'B'`, false},
		{`$['key with space'] == 'x'`, true},
		{`$['we\'ird'] == 'w'`, true},
		{`$["we'ird"] == 'w'`, true},
		{`$['back\\slash'] == 'b'`, true},
		{`$.esc == 'a"bé'`, true},
		{`$.esc =~ '^a"b'`, true},
		{`$.type =~ '^order_'`, true},
		{`$.type =~ '^ORDER_'`, false},
		{`$.type =~ '(?i)^ORDER_'`, true},
		{`$.count =~ '3'`, false},
		{`$.missing =~ '.*'`, false},
		{`$.type =~ 'created$' and $.amount > 10`, true},
		{`$.type == 'x' or $.amount > 10`, true},
		{`not $.type == 'x' and $.count == 3`, true},
		{`not ($.type == 'order_created' or $.count == 3)`, false},
		{`$.type == 'x' or $.type == 'y' or $.count == 3`, true},
		{`true`, true},
		{`false or $.count == 3`, true},
		{`$.ts < '2024-05-01T11:30:00Z'`, true}, // string vs string: bytewise
		{`@partition == '3'`, true},
		{`@partition in ['1', '3']`, true},
		{`@sequence_number >= 42`, true},
		{`@sequence_number > 42`, false},
		{`@offset == '4096'`, true},
		{`@enqueued_time > '2024-05-01T11:59:59Z'`, true},
		{`@enqueued_time == '2024-05-01T14:00:00+02:00'`, true},
		{`@enqueued_time > $.ts`, true},
		{`$.ts < @enqueued_time`, true},
		{`@enqueued_time == $.type`, false}, // not a timestamp: no comparison
		{`@partition_key == 'customer-7'`, true},
		{`@content_type == null`, true},
		{`exists(@content_type)`, false},
		{`exists(@partition_key)`, true},
		{`@properties.type == 'order'`, true},
		{`@properties.version == 2`, true},
		{`@properties.version == '2'`, false},
		{`@properties.ratio < 1`, true},
		{`@properties.flag == true`, true},
		{`@properties.nil == null`, true},
		{`exists(@properties.nil)`, true},
		{`exists(@properties.absent)`, false},
		{`@properties.absent != 'x'`, true},
		{`@properties.at < @enqueued_time`, true},
		{`@properties.at == '2024-01-01T00:00:00Z'`, true},
		{`@body =~ '"amount":12.5'`, true},
		{`$ != null`, true},
		{`$.type=='order_created'and$.count==3`, true},
	}
	ev := testEvent(body)
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			e, err := Compile(tt.cond)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := e.Eval(ev)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got != tt.want {
				t.Fatalf("Eval = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEvalInvalidJSON(t *testing.T) {
	for _, b := range []string{`not json`, ``, `{"type":"a"`, `{"type":"a"} x`} {
		ev := testEvent(b)
		_, err := MustCompile(`$.type == 'a'`).Eval(ev)
		if !errors.Is(err, mapping.ErrInvalidJSON) {
			t.Errorf("body %q: err = %v, want ErrInvalidJSON", b, err)
		}
	}
	// Metadata alone never reads the body; or short-circuits before the path.
	ev := testEvent(``)
	for _, c := range []string{`@partition == '3'`, `@body == '' or $.op == 'd'`} {
		got, err := MustCompile(c).Eval(ev)
		if err != nil || !got {
			t.Errorf("%s on an empty body = %v, %v; want true, nil", c, got, err)
		}
	}
}

// TestEvalUnknown: a path into a body that is not JSON is unknown, and
// conditions follow three-valued logic; a condition that stays unknown is
// an error naming the path, never a silent false.
func TestEvalUnknown(t *testing.T) {
	tests := []struct {
		cond string
		want string // "true", "false" or "unknown"
	}{
		{`$.op == 'd' or @body == ''`, "true"}, // the README's delete example
		{`$.op == 'd' or true`, "true"},
		{`$.op == 'd' and false`, "false"},
		{`$.op == 'd' and @partition == '9'`, "false"},
		{`not ($.op == 'd') or @partition == '3'`, "true"},
		{`$.op == 'd'`, "unknown"},
		{`$.op != 'd'`, "unknown"},
		{`not $.op == 'd'`, "unknown"},
		{`$.op == 'd' or @partition == '9'`, "unknown"},
		{`$.op == 'd' and true`, "unknown"},
		{`exists($.op) or false`, "unknown"},
		{`$.op in ['d'] and @partition == '3'`, "unknown"},
		{`$.op =~ 'd' or $.x == 1`, "unknown"},
		{`@partition == '3' and ($.a == 1 or @body == '')`, "true"},
	}
	for _, body := range []string{``, `plain text`} {
		for _, tt := range tests {
			t.Run(body+"/"+tt.cond, func(t *testing.T) {
				got, err := MustCompile(tt.cond).Eval(testEvent(body))
				if strings.Contains(tt.cond, "@body == ''") && body != "" {
					tt.want = "unknown" // @body is not empty, so only the path could decide
				}
				switch tt.want {
				case "unknown":
					var ue *UnknownError
					if !errors.As(err, &ue) || !errors.Is(err, mapping.ErrInvalidJSON) || got {
						t.Fatalf("Eval = %v, %v; want false and an *UnknownError wrapping ErrInvalidJSON", got, err)
					}
					if !strings.HasPrefix(err.Error(), "unknown: $.") || !strings.Contains(err.Error(), "reads a body that is not JSON") {
						t.Fatalf("error %q does not name the path it could not read", err)
					}
				default:
					if err != nil || got != (tt.want == "true") {
						t.Fatalf("Eval = %v, %v; want %s, nil", got, err, tt.want)
					}
				}
			})
		}
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct{ cond, want string }{
		{``, `column 1: empty condition`},
		{`$.type`, `column 7: expected operator after $.type`},
		{`$.type 'x'`, `column 8: expected operator after $.type, found string "x"`},
		{`$.type = 'x'`, `column 8: unexpected = (use == to compare)`},
		{`$.type == `, `column 11: unexpected end of expression`},
		{`$.type == 'x`, `column 11: unterminated string`},
		{`$.type == 'x' and`, `column 18: unexpected end of expression`},
		{`$.type == 'x' nand $.a == 1`, `column 15: expected and, or or the end of the condition, found "nand"`},
		{`($.type == 'x'`, `column 15: expected ) to close the ( at column 1`},
		{`$.type == 'x')`, `column 14: unexpected ) with no ( before it`},
		{`$.a..b == 1`, `column 1: invalid path`},
		{`$.a[x] == 1`, `column 1: invalid path`},
		{`@nope == 1`, `column 1: unknown metadata @nope (want @partition, @sequence_number, @offset, @enqueued_time, @partition_key, @content_type, @properties.NAME or @body)`},
		{`@properties. == 1`, `column 1: source "@properties.": empty property name`},
		{`'a' == 'b'`, `column 1: 'a' == 'b' compares two literals`},
		{`1 < 2`, `column 1: 1 < 2 compares two literals`},
		{`'a' in ['b']`, `column 1: 'a' in [...] compares literals`},
		{`$['a\'b == 1`, `unterminated quoted key in path`},
		{`@sequence_number == 'x'`, `column 21: @sequence_number is a number and 'x' a string`},
		{`@partition == 3`, `column 15: @partition is a string and 3 a number: they never compare (write '3' to compare as a string)`},
		{`@partition == null`, `column 1: @partition is never null`},
		{`@enqueued_time > 'yesterday'`, `column 18: 'yesterday' is compared with the timestamp @enqueued_time and is not an RFC 3339 timestamp`},
		{`@enqueued_time > 5`, `is a timestamp and 5 a number`},
		{`$.a < null`, `column 7: null cannot be ordered`},
		{`$.a > true`, `column 7: booleans cannot be ordered`},
		{`$.a =~ '('`, `column 8: invalid regular expression: missing closing ): "("`},
		{`$.a =~ 5`, `column 8: expected a quoted regular expression after =~`},
		{`'x' =~ 'y'`, `column 1: the left side of =~ must read the event`},
		{`@sequence_number =~ '1'`, `column 1: @sequence_number is a number; =~ matches strings`},
		{`$.a in 1`, `column 8: expected [ after in`},
		{`$.a in [1 2]`, `column 11: expected , or ] in the list of in`},
		{`$.a in [$.b]`, `column 9: the list of in holds literals only`},
		{`@partition in ['1', 2]`, `column 21: @partition is a string and 2 a number`},
		{`$.a not 1`, `column 9: expected in after not`},
		{`exists($.a`, `column 11: expected ) after exists($.a`},
		{`exists $.a`, `column 8: expected ( after exists`},
		{`exists(@partition)`, `column 8: exists(@partition) is always true`},
		{`exists('x')`, `column 8: exists('x') is always true`},
		{`@index == 1`, `column 1: @index is not available in a condition (want @partition,`},
		{`$.a == 1.`, `column 8: invalid number`},
		{`$.a == 12abc`, `column 8: invalid number "12a"`},
		{`$.a ! 1`, `column 5: unexpected ! (use not, or != to compare)`},
		{`$.a == 1 & $.b == 2`, `column 10: unexpected '&'`},
		{`é == 1`, `column 1: unexpected 'é'`},
		{`$.a == 'é' and x`, `column 16: unexpected x`},
		{strings.Repeat("(", 200) + "true" + strings.Repeat(")", 200), `expression nested too deep`},
		{strings.Repeat("not ", 200) + "true", `expression nested too deep`},
	}
	for _, tt := range tests {
		t.Run(tt.cond, func(t *testing.T) {
			_, err := Compile(tt.cond)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("Compile error = %v, want a *SyntaxError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Compile error = %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestZeroValues(t *testing.T) {
	if _, err := new(Expr).Eval(testEvent(body)); err == nil {
		t.Fatal("Eval of a zero Expr succeeded")
	}
	if _, err := new(Template).Append(nil, testEvent(body)); err == nil {
		t.Fatal("Append of a zero Template succeeded")
	}
}

func TestUnmarshalText(t *testing.T) {
	var e Expr
	if err := e.UnmarshalText([]byte(`$.type == 'a'`)); err != nil {
		t.Fatal(err)
	}
	got, err := e.Eval(testEvent(`{"type":"a"}`))
	if err != nil || !got {
		t.Fatalf("Eval = %v, %v", got, err)
	}
	if b, _ := e.MarshalText(); string(b) != `$.type == 'a'` {
		t.Fatalf("MarshalText = %s", b)
	}
	if err := e.UnmarshalText([]byte(`$.type`)); err == nil {
		t.Fatal("UnmarshalText of a bad condition succeeded")
	}
}

func TestTemplate(t *testing.T) {
	ev := testEvent(body)
	tests := []struct{ tmpl, want, err string }{
		{`orders_{$.type}`, `orders_order_created`, ``},
		{`{$.customer.tier}/{@partition}/{@sequence_number}`, `gold/3/42`, ``},
		{`{ $.count }-{$.amount}-{$.ok}`, `3-12.5-true`, ``},
		{`{$.esc}`, `a"bé`, ``},
		{`{@enqueued_time}`, `2024-05-01T12:00:00Z`, ``},
		{`{@properties.type}_{@properties.version}`, `order_2`, ``},
		{`{{literal}}`, `{literal}`, ``},
		{`static`, `static`, ``},
		{`x_{$.missing}`, ``, `$.missing is missing: no value`},
		{`x_{$.none}`, ``, `$.none is null: no value`},
		{`x_{$.customer}`, ``, `$.customer is an object or array: no value`},
		{`x_{@content_type}`, ``, `@content_type is null: no value`},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			tp, err := CompileTemplate(tt.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tp.Append(nil, ev)
			if tt.err != "" {
				if !errors.Is(err, ErrNoValue) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Append error = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("Append = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if _, err := MustCompileTemplate(`{$.a}`).Append(nil, testEvent(`nope`)); !errors.Is(err, mapping.ErrInvalidJSON) {
		t.Fatalf("template on an invalid body: %v", err)
	}
	if !MustCompileTemplate(`a{{b}}`).Literal() || MustCompileTemplate(`a{$.b}`).Literal() {
		t.Fatal("Literal is wrong")
	}
}

func MustCompileTemplate(s string) *Template {
	t, err := CompileTemplate(s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestTemplateErrors(t *testing.T) {
	tests := []struct{ tmpl, want string }{
		{`orders_{$.type`, `column 8: unclosed {`},
		{`orders_{}`, `column 9: expected a JSON path ($.field) or @metadata after {, found "}"`},
		{`orders_{'x'}`, `column 9: expected a JSON path`},
		{`orders_{$.a $.b}`, `column 13: expected } after $.a`},
		{`orders_}`, `column 8: unexpected }`},
		{`{@nope}`, `column 2: unknown metadata @nope (want @partition,`},
	}
	for _, tt := range tests {
		_, err := CompileTemplate(tt.tmpl)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CompileTemplate(%q) = %v, want %q", tt.tmpl, err, tt.want)
		}
	}
}

func TestEvalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops pooled state at random: allocations are counted without -race")
	}
	ev := testEvent(body)
	for _, c := range []string{
		`$.type == 'order_created' and $.amount > 10`,
		`$.customer.tier in ['gold', 'platinum'] or @properties.type == 'x'`,
		`$.esc == 'a"bé'`,
		`@enqueued_time > '2024-01-01T00:00:00Z' and @partition == '3'`,
	} {
		e := MustCompile(c)
		e.Eval(ev) // warm the pool
		if n := testing.AllocsPerRun(100, func() { e.Eval(ev) }); n > 0 {
			t.Errorf("%s: %.1f allocations per Eval, want 0", c, n)
		}
	}
	tp := MustCompileTemplate(`orders_{$.type}_{@partition}`)
	buf := make([]byte, 0, 64)
	tp.Append(buf, ev)
	if n := testing.AllocsPerRun(100, func() { tp.Append(buf[:0], ev) }); n > 0 {
		t.Errorf("template: %.1f allocations per Append, want 0", n)
	}
}

func TestConcurrentEval(t *testing.T) {
	e := MustCompile(`$.type == 'order_created' and $.esc == 'a"bé'`)
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 500 {
				got, err := e.Eval(testEvent(body))
				ok = ok && got && err == nil
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Fatal("concurrent Eval gave a wrong result")
		}
	}
}
