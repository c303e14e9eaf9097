package conntest

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestFilters(t *testing.T) {
	res, out, err := runFile(t, "testdata/filter.yaml", "testdata/filter_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 3 {
		t.Fatalf("result %+v, want 3 cases passed; report:\n%s", res, out)
	}
	res, out, err = runFile(t, "testdata/filter.yaml", "testdata/filter_fail.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"event 1 (partition 0, sequence number 0):\n      want the event dropped by the filter, got a row: id=\"o-1\" type=\"order_created\"",
		"event 2 (partition 0, sequence number 1):\n      want a row, got the event dropped by the connector's filter",
		"event 3 (partition 0, sequence number 2):\n      want the event dropped by the filter, got a dead letter: filter.keep: unknown: $.type reads a body that is not JSON",
		"event 4 (partition 0, sequence number 3):\n      want a dead letter, got the event dropped by the connector's filter",
		"want a dead letter containing \"invalid JSON\", got a failure that stops the connector (errors.tolerance: none): filter.drop: unknown: $.type reads a body that is not JSON: invalid JSON body",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if res.Failed != 2 {
		t.Errorf("result %+v, want 2 failed", res)
	}
}

func TestExplodeExpectations(t *testing.T) {
	f := &File{Tests: []Case{{
		Name: "records", Connector: "logs",
		Events: []Event{
			{Body: `{"records": [{"msg": "a", "n": 1}, {"msg": "b", "n": "x"}, {"msg": "c"}]}`},
			{Body: `{"records": []}`},
			{Body: `{"records": 3}`},
			{Body: `{"records": [{"msg": "a"}]}`},
		},
		Expect: []Expect{
			{Elements: []Expect{{Row: map[string]any{"msg": "a", "i": 0, "n": 1}}, {DeadLetter: ptr(`element 1: column "n"`)}, {Row: map[string]any{"msg": "c", "i": 2, "n": nil}}}},
			{Rows: []map[string]any{}},
			{DeadLetter: ptr("the value is a number, not an array")},
			{Rows: []map[string]any{{"msg": "z"}, {"msg": "a"}}},
		},
	}}}
	var out strings.Builder
	res, err := Run(context.Background(), loadConfig(t, "testdata/filter.yaml"), "x.yaml", f, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "    event 4 (partition 0, sequence number 3):\n      want 2 rows, got 1 element:\n        element 0: a row: i=0 msg=\"a\" n=null\n"
	if res.Failed != 1 || !strings.Contains(out.String(), want) {
		t.Fatalf("result %+v, report:\n%s\nwant it to contain:\n%s", res, out.String(), want)
	}
	_, _, err = runFile(t, "testdata/filter.yaml", "testdata/explode_malformed.yaml")
	wantPaths := []string{"tests[0].expect[0].row", "tests[0].expect[1].rows[0].mgs", "tests[0].expect[2].elements[0]", "tests[0].expect[2].elements[1]", "tests[0].expect[3]", "tests[1].expect[0].rows"}
	if got := problemPaths(t, err); !slices.Equal(got, wantPaths) {
		t.Errorf("problem paths %q, want %q\n%v", got, wantPaths, err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestExplodeRoutes(t *testing.T) {
	f := &File{Tests: []Case{{
		Name: "routes", Connector: "routed-logs",
		Events: []Event{
			{Body: `{"records": [{"msg": "a"}, {"msg": "b"}]}`},
			{Body: `{"records": [{"msg": "a"}]}`},
			{Body: `{"x": 1}`},
			{Body: `{"records": []}`},
		},
		Expect: []Expect{
			{Route: ptr("records"), Rows: []map[string]any{{"msg": "a", "i": 0}, {"msg": "b", "i": 1}}},
			{Row: map[string]any{"msg": "a"}},
			{Route: ptr("other"), Row: map[string]any{"body": `{"x": 1}`}},
			{Rows: []map[string]any{}},
		},
	}}}
	var out strings.Builder
	res, err := Run(context.Background(), loadConfig(t, "testdata/filter.yaml"), "x.yaml", f, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := "    event 2 (partition 0, sequence number 1):\n      want a row, got 1 element (the mapping explodes: use rows)\n"
	if res.Failed != 1 || !strings.Contains(out.String(), want) || strings.Contains(out.String(), "event 1 ") || strings.Contains(out.String(), "event 3 ") || strings.Contains(out.String(), "event 4 ") {
		t.Fatalf("result %+v, report:\n%s\nwant only event 2 to fail with:\n%s", res, out.String(), want)
	}
}
