package expr

import "testing"

// FuzzCompile checks that no input makes the parser panic, and that a
// condition that compiles evaluates without panicking.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`$.type == 'order_created' and $.amount > 10`,
		`not ($.a in [1, 'x', null] or exists($.b[0]['c d']))`,
		`@enqueued_time > '2024-01-01T00:00:00Z'`,
		`$.type =~ '^order_\d+$'`,
		`@properties.type != "x" or @sequence_number <= -1.5e3`,
		`true`, `(((`, `$[`, `$['`, `@`, `'\`, `exists(`, `$.a not in []`,
	} {
		f.Add(s)
	}
	ev := testEvent(body)
	f.Fuzz(func(t *testing.T, src string) {
		if e, err := Compile(src); err == nil {
			e.Eval(ev)
			e.Eval(testEvent(`{"a":[1,{"b":null}]}`))
		}
		if tp, err := CompileTemplate(src); err == nil {
			tp.Append(nil, ev)
		}
	})
}
