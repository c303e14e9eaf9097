package conntest

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestDeleteExpectations runs delete, skipped and row expectations against
// a delete condition and the Debezium preset with routes, passing and
// failing, and checks what a malformed file is told.
func TestDeleteExpectations(t *testing.T) {
	cfg := loadConfig(t, "testdata/deletes.yaml")
	run := func(f *File) (Result, string, error) {
		var out strings.Builder
		res, err := Run(context.Background(), cfg, "deletes_test.yaml", f, &out)
		return res, out.String(), err
	}
	pass := &File{Tests: []Case{
		{Name: "kv", Connector: "kv",
			Events: []Event{{Body: `{"op": "u", "id": 1, "v": "x"}`}, {Body: `{"op": "d", "key": 1}`}, {Body: `{"op": "d"}`}},
			Expect: []Expect{{Row: map[string]any{"id": 1, "v": "x"}}, {Delete: map[string]any{"id": 1}}, {DeadLetter: ptr(`column "id": missing value`)}}},
		{Name: "cdc", Connector: "cdc",
			Events: []Event{
				{Body: `{"op": "c", "source": {"table": "a"}, "after": {"id": 7}}`},
				{Body: `{"op": "d", "source": {"table": "b"}, "before": {"code": "x", "name": null}}`},
				{Body: ``},
			},
			Expect: []Expect{{Route: ptr("a"), Row: map[string]any{"id": 7}}, {Table: ptr("b"), Delete: map[string]any{"code": "x"}}, {Skipped: true}}},
	}}
	res, out, err := run(pass)
	if err != nil || res.Failed != 0 || res.Cases != 2 {
		t.Fatalf("result %+v %v, want 2 cases passed; report:\n%s", res, err, out)
	}

	fail := &File{Tests: []Case{{Name: "wrong", Connector: "kv",
		Events: []Event{{Body: `{"op": "u", "id": 1}`}, {Body: `{"op": "d", "key": 2}`}, {Body: `{"op": "d", "key": 3}`}},
		Expect: []Expect{{Delete: map[string]any{"id": 1}}, {Delete: map[string]any{"id": 3}}, {Skipped: true}},
	}}}
	res, out, err = run(fail)
	if err != nil || res.Failed != 1 {
		t.Fatalf("result %+v %v, want the case failed; report:\n%s", res, err, out)
	}
	for _, want := range []string{
		"event 1 (partition 0, sequence number 0):\n      want a delete, got a row: id=1 v=null",
		"event 2 (partition 0, sequence number 1):\n      column id: want 3, got 2",
		"event 3 (partition 0, sequence number 2):\n      want nothing written (skipped), got a delete of id=3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}

	malformed := &File{Tests: []Case{{Name: "bad", Connector: "kv",
		Events: []Event{{Body: `{}`}, {Body: `{}`}, {Body: `{}`}},
		Expect: []Expect{{Delete: map[string]any{"v": "x"}}, {Delete: map[string]any{}}, {Delete: map[string]any{"id": 1}, Row: map[string]any{"id": 1}}},
	}}}
	_, _, err = run(malformed)
	var me *MalformedError
	if !errors.As(err, &me) {
		t.Fatalf("got %v, want a MalformedError", err)
	}
	for _, want := range []string{
		"tests[0].expect[0].delete.v: not a key column of the connector",
		"tests[0].expect[1].delete: name the key's columns and values",
		"tests[0].expect[2]: want exactly one of row or delete",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
