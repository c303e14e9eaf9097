package expr

import "testing"

func BenchmarkEval(b *testing.B) {
	for _, bc := range []struct{ name, cond string }{
		{"metadata", `@partition == '3' and @sequence_number > 10`},
		{"one_path", `$.type == 'order_created'`},
		{"three_paths", `$.type in ['order_created', 'order_cancelled'] and $.amount > 10 and not exists($.deleted)`},
		{"regexp", `$.type =~ '^order_(created|cancelled)$'`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e := MustCompile(bc.cond)
			ev := testEvent(body)
			b.SetBytes(int64(len(ev.Body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Eval(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTemplate(b *testing.B) {
	tp := MustCompileTemplate(`orders_{$.type}_{@partition}`)
	ev := testEvent(body)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tp.Append(buf[:0], ev); err != nil {
			b.Fatal(err)
		}
	}
}
