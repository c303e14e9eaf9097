package conntest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRoutes checks route and table expectations: the route an event
// takes, the table it renders, its row by that route's columns, and the
// differences and file problems each kind of mistake gives.
func TestRoutes(t *testing.T) {
	write := func(t *testing.T, text string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "routed_test.yaml")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pass := `tests:
  - name: by value
    connector: routed
    events: [{body: {n: 500}}, {body: {n: 5, kind: a}}, {body: {n: 7}}]
    expect:
      - {route: big, table: big, row: {n: 500}}
      - {route: 'small_{$.kind}', table: small_a, row: {n: 5, kind: a}}
      - dead_letter: 'small_{$.kind}'
  - name: parquet routes by name or path
    connector: routed-pq
    events: [{body: {n: 500}}, {body: {n: 5, kind: a}}]
    expect:
      - {route: big, row: {n: 500}}
      - {route: 'kind={$.kind}/{partition}-{first_seq}-{last_seq}.parquet', row: {n: 5}}
`
	res, out, err := runFile(t, "testdata/routed.yaml", write(t, pass))
	if err != nil || res.Failed != 0 || res.Cases != 2 {
		t.Fatalf("result %+v, %v; report:\n%s", res, err, out)
	}

	fail := `tests:
  - name: wrong route, table and value
    connector: routed
    events: [{body: {n: 500}}, {body: {n: 5, kind: a}}, {body: {n: 6, kind: b}}]
    expect:
      - {route: 'small_{$.kind}'}
      - {table: small_b, row: {n: 5}}
      - row: {n: 600}
`
	res, out, err = runFile(t, "testdata/routed.yaml", write(t, fail))
	if err != nil || res.Failed != 1 {
		t.Fatalf("result %+v, %v; report:\n%s", res, err, out)
	}
	for _, want := range []string{"route: want small_{$.kind}, got big", "table: want small_b, got small_a", `column n: want 600, got 6`} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	malformed := `tests:
  - name: problems
    connector: routed
    events: [{body: {n: 1}}, {body: {n: 1}}]
    expect:
      - {route: nope}
      - {route: big, row: {kind: a}}
  - name: a parquet route has no table
    connector: routed-pq
    events: [{body: {n: 1}}]
    expect: [{table: big}]
`
	_, _, err = runFile(t, "testdata/routed.yaml", write(t, malformed))
	for _, want := range []string{`tests[0].expect[0].route: no route named "nope"`, "tests[0].expect[1].row.kind: not a column of route big", "tests[1].expect[0].table: this connector's routes have paths, not tables"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
}
