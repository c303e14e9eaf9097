package conntest

import (
	"context"
	"strings"
	"testing"
)

// TestAvroEvents: cases give Avro events as a JSON record and a schema;
// they are encoded and decoded as the running connector decodes them
// (logical types, a missing required column, the filter, the reader
// schema's resolution).
func TestAvroEvents(t *testing.T) {
	res, out, err := runFile(t, "testdata/avro.yaml", "testdata/avro_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 3 {
		t.Fatalf("result %+v, want 3 cases passed; report:\n%s", res, out)
	}
	cfg := loadConfig(t, "testdata/avro.yaml")
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{Event{Body: map[string]any{"id": 1}}, "tests[0].events[0]: avro_schema: required"},
		{Event{Body: map[string]any{"id": "x"}, AvroSchema: "order-v1.avsc"}, "tests[0].events[0]: body: does not fit avro_schema: $.id"},
		{Event{Body: map[string]any{"id": 1}, AvroSchema: "none.avsc"}, "tests[0].events[0]: avro_schema: open"},
	} {
		f := &File{Tests: []Case{{Name: "x", Connector: "orders", Events: []Event{c.ev}, Expect: []Expect{{Filtered: true}}}}}
		_, err := Run(context.Background(), cfg, "testdata/avro_test.yaml", f, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.ev, err, c.want)
		}
	}
}

// TestAutoColumns: `ehsink test` checks a columns: auto connector against
// the columns it derives, and prints them: from the schemas the events
// name (v1's fields, then v2's channel) or from the reader schema.
func TestAutoColumns(t *testing.T) {
	res, out, err := runFile(t, "testdata/auto.yaml", "testdata/auto_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 2 {
		t.Fatalf("result %+v, want 2 cases passed; report:\n%s", res, out)
	}
	for _, want := range []string{
		"connector by-registry: columns: auto derives\n  - {name: partition, from: \"@partition\", type: string, nullable: false}\n",
		"  - {name: note, from: \"$.note\", type: string, nullable: true}\n  - {name: channel, from: \"$.channel\", type: string, nullable: true}\n",
		"connector by-reader: columns: auto derives\n",
		"  - {name: amount, from: \"$.amount\", type: decimal(12,2), nullable: false}\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
