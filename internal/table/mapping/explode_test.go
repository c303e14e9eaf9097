package mapping

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

func mustExplode(t testing.TB, path string, cols ...string) *Mapper {
	t.Helper()
	p, err := ParsePath(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := CompileWith(mustColumns(t, cols...), Options{Explode: p})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// explodeAll returns the rows of ev, each element's error in place of its
// row.
func explodeAll(t *testing.T, m *Mapper, body string) ([]any, error) {
	t.Helper()
	r, err := m.Rows(&sinks.Event{Partition: "2", SequenceNumber: 9, Body: []byte(body)})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []any
	for i := range r.Len() {
		row := make([]any, len(m.Columns()))
		if err := r.Map(i, row); err != nil {
			out = append(out, err)
			continue
		}
		out = append(out, row)
	}
	return out, nil
}

func TestExplode(t *testing.T) {
	m := mustExplode(t, "$.records", "cat|$.category", "level|$.level|int32", "i|@index", "seq|@sequence_number", "p|@partition", "whole|$|json")
	got, err := explodeAll(t, m, `{"tenant":"t1","records":[{"category":"Audit","level":4},{"category":"Sign\u0049n","level":"x"},{"level":1},{"category":"c"}],"after":{"records":[1]}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		[]any{"Audit", int32(4), int64(0), int64(9), "2", jsonOf(`{"category":"Audit","level":4}`)},
		"element 1: column \"level\": \"x\" is not a number",
		[]any{nil, int32(1), int64(2), int64(9), "2", jsonOf(`{"level":1}`)},
		[]any{"c", nil, int64(3), int64(9), "2", jsonOf(`{"category":"c"}`)},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if err, ok := got[i].(error); ok {
			var ee *ElementError
			if !errors.As(err, &ee) || ee.Index != i || err.Error() != want[i] {
				t.Errorf("row %d: error %v, want %v", i, err, want[i])
			}
			continue
		}
		if !reflect.DeepEqual(fmt.Sprint(got[i]), fmt.Sprint(want[i])) {
			t.Errorf("row %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func jsonOf(s string) any { return []byte(s) }

func TestExplodeEventErrors(t *testing.T) {
	m := mustExplode(t, "$.records", "c|$.c")
	for _, tt := range []struct{ body, want string }{
		{`{"other":[]}`, "cannot explode $.records: the path is not in the body"},
		{`{"records":null}`, "cannot explode $.records: the value is null, not an array"},
		{`{"records":{"c":1}}`, "cannot explode $.records: the value is an object, not an array"},
		{`{"records":"x"}`, "cannot explode $.records: the value is a string, not an array"},
		{`{"records":[{"c":1}]`, "invalid JSON body"},
		{`{"records":[{"c":1},]}`, "invalid JSON body"},
	} {
		_, err := explodeAll(t, m, tt.body)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("body %s: error %v, want %q", tt.body, err, tt.want)
		}
	}
	rows, err := explodeAll(t, m, `{"records":[]}`)
	if err != nil || len(rows) != 0 {
		t.Fatalf("empty array: %v rows, %v; want none, no error", rows, err)
	}
	if err := m.Map(&sinks.Event{Body: []byte(`{"records":[]}`)}, make([]any, 1)); err == nil {
		t.Fatal("Map on an exploding mapper succeeded")
	}
}

func TestExplodeShapes(t *testing.T) {
	// The body itself is the array; elements are scalars; nested paths.
	m := mustExplode(t, "$", "v|$|text", "i|@index")
	got, err := explodeAll(t, m, `["a", 2, true]`)
	if err != nil || fmt.Sprint(got) != "[[a 0] [2 1] [true 2]]" {
		t.Fatalf("got %v, %v", got, err)
	}
	m = mustExplode(t, "$.a[1].b", "x|$.x.y[0]")
	got, err = explodeAll(t, m, `{"a":[{"b":[{"x":{"y":[9]}}]},{"b":[{"x":{"y":[1,2]}},{"x":null},{"x":{"y":["s"]}}]}]}`)
	if err != nil || fmt.Sprint(got) != "[[1] [<nil>] [s]]" {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestExplodeValidate(t *testing.T) {
	_, err := CompileWith(mustColumns(t, "i|@index"), Options{})
	var fe *sinks.FieldError
	if !errors.As(err, &fe) || fe.Field != "i.from" || !strings.Contains(err.Error(), "set explode") {
		t.Fatalf("@index without explode: %v", err)
	}
	for _, bad := range []string{"records", "@body", "$.a[", "$..a"} {
		if _, err := ParsePath(bad); err == nil {
			t.Errorf("ParsePath(%q) succeeded", bad)
		}
	}
	p, err := ParsePath("$['a b'].c")
	if err != nil || p.String() != `$["a b"].c` || !p.IsSet() {
		t.Fatalf("ParsePath = %v, %v", p, err)
	}
	var q Path
	if err := q.UnmarshalText([]byte("")); err != nil || q.IsSet() {
		t.Fatalf("empty path: %v, %v", q, err)
	}
}

func TestExplodeAllocs(t *testing.T) {
	m := mustExplode(t, "$.records", "cat|$.category", "ms|$.durationMs|int32", "i|@index")
	ev := &sinks.Event{Body: []byte(recordsBody(20))}
	row := make([]any, 3)
	run := func() {
		r, err := m.Rows(ev)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Len() {
			if err := r.Map(i, row); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
	run()
	// The values themselves are boxed (as Map's are); the scan and the
	// iteration add nothing per element.
	if n := testing.AllocsPerRun(50, run); n > 20*3 {
		t.Fatalf("%.0f allocations for 20 elements of 3 columns", n)
	}
}

// recordsBody is an Azure platform-logs event of n records.
func recordsBody(n int) string {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(recordJSON(i))
	}
	b.WriteString(`]}`)
	return b.String()
}

func recordJSON(i int) string {
	return fmt.Sprintf(`{"time":"2026-05-06T07:08:%02d.1234567Z","resourceId":"/SUBSCRIPTIONS/0000/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.KEYVAULT/VAULTS/KV1","operationName":"SecretGet","category":"AuditEvent","resultType":"Success","durationMs":%d,"callerIpAddress":"10.0.0.%d","level":"Informational","properties":{"id":"https://kv1.vault.azure.net/secrets/s%d","clientInfo":"azsdk-go"}}`, i%60, 10+i, i%250, i)
}

// BenchmarkExplode compares, in the same loop, rows made from an event of
// 20 records with the same rows made from one event per record. The two
// workloads alternate inside each iteration and are timed apart, so that a
// busy machine slows both alike; the figure to read is explode/single, the
// ratio of their rows per second.
func BenchmarkExplode(b *testing.B) {
	specs := []string{"time|$.time|timestamptz", "resource|$.resourceId", "operation|$.operationName", "category|$.category",
		"result|$.resultType", "duration_ms|$.durationMs|integer", "caller|$.callerIpAddress", "props|$.properties|json", "seq|@sequence_number"}
	const n = 20
	xm := mustExplode(b, "$.records", append(specs, "idx|@index")...)
	xev := &sinks.Event{SequenceNumber: 7, Body: []byte(recordsBody(n))}
	xrow := make([]any, len(specs)+1)
	sm, err := Compile(mustColumns(b, specs...))
	if err != nil {
		b.Fatal(err)
	}
	evs := make([]sinks.Event, n)
	for i := range evs {
		evs[i] = sinks.Event{SequenceNumber: int64(i), Body: []byte(recordJSON(i))}
	}
	srow := make([]any, len(specs))
	var exploded, single time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		r, err := xm.Rows(xev)
		if err != nil {
			b.Fatal(err)
		}
		for i := range r.Len() {
			if err := r.Map(i, xrow); err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
		t1 := time.Now()
		for i := range evs {
			if err := sm.Map(&evs[i], srow); err != nil {
				b.Fatal(err)
			}
		}
		exploded += t1.Sub(t0)
		single += time.Since(t1)
	}
	b.ReportMetric(float64(n*b.N)/exploded.Seconds(), "exploded_rows/s")
	b.ReportMetric(float64(n*b.N)/single.Seconds(), "single_rows/s")
	b.ReportMetric(single.Seconds()/exploded.Seconds(), "explode/single")
}

// TestExplodeScalarElements: a scalar element has no keys, so a path into
// it is missing (NULL in a nullable column, an error of the element in a
// non-nullable one), and `$` reads the element itself, as the README says.
func TestExplodeScalarElements(t *testing.T) {
	m := mustExplode(t, "$.records", "x|$.x|int32", "whole|$|json")
	got, err := explodeAll(t, m, `{"records":[1,"a",{"x":2}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		[]any{nil, jsonOf(`1`)},
		[]any{nil, jsonOf(`"a"`)},
		[]any{int32(2), jsonOf(`{"x":2}`)},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) { // json values are raw bytes of distinct types
		t.Fatalf("rows %v, want %v", got, want)
	}
	cols := mustColumns(t, "x|$.x|int32")
	cols[0].Nullable = false
	p, _ := ParsePath("$.records")
	strict, err := CompileWith(cols, Options{Explode: p})
	if err != nil {
		t.Fatal(err)
	}
	got, err = explodeAll(t, strict, `{"records":[1,{"x":2}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || fmt.Sprint(got[0]) != `element 0: column "x": missing value at $.x` || !reflect.DeepEqual(got[1], []any{int32(2)}) {
		t.Fatalf("rows %v, want element 0 refused (missing value) and [2]", got)
	}
}
