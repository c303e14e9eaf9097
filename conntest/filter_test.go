package conntest

import (
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
		"event 3 (partition 0, sequence number 2):\n      want the event dropped by the filter, got a dead letter: filter.keep: invalid JSON body",
		"event 4 (partition 0, sequence number 3):\n      want a dead letter, got the event dropped by the connector's filter",
		"want a dead letter containing \"invalid JSON\", got a failure that stops the connector (errors.tolerance: none): filter.drop: invalid JSON body",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if res.Failed != 2 {
		t.Errorf("result %+v, want 2 failed", res)
	}
}
