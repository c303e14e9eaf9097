package cdc

import (
	"strings"
	"testing"

	"github.com/ehsink/ehsink/sinks"
)

func TestDeleteCondition(t *testing.T) {
	spec := Spec{
		Key:     []string{"id"},
		Columns: columns(t, "id|$.id|bigint", "name|$.name"),
		// A delete names its key in a field of its own, or, with an empty
		// or null body (a tombstone), in the partition key.
		Delete: &Delete{When: `$.op == 'd' or @body == '' or $ == null`, Key: map[string]string{"id": "$.key.id"}},
	}
	r, err := Compile(spec)
	if err != nil {
		t.Fatal(err)
	}
	tombstones, err := Compile(Spec{Key: spec.Key, Columns: spec.Columns,
		Delete: &Delete{When: `@body == '' or $ == null`, Key: map[string]string{"id": "@partition_key"}}})
	if err != nil {
		t.Fatal(err)
	}
	key := "42"
	tests := []struct {
		rules *Rules
		body  string
		op    Op
		want  string
	}{
		{r, `{"op": "u", "id": 7, "name": "a"}`, OpUpsert, "id=7 name=a"},
		{r, `{"op": "d", "key": {"id": 7}}`, OpDelete, "id=7 name=<nil>"},
		{r, `{"op": "d", "id": 7}`, OpDelete, `error: column "id": missing value`},
		{r, `{"op": "d", "key": {"id": "x"}}`, OpDelete, `error: column "id": "x" is not`},
		{r, `{"id": 8}`, OpUpsert, "id=8 name=<nil>"},
		{r, `{"name": "no id"}`, OpUpsert, `error: column "id": missing value`},
		{r, `not json`, OpUpsert, `error: delete.when:`},
		{tombstones, ``, OpDelete, "id=42 name=<nil>"},
		{tombstones, `null`, OpDelete, "id=42 name=<nil>"},
		{tombstones, `{"id": 9, "name": "b"}`, OpUpsert, "id=9 name=b"},
	}
	for _, tt := range tests {
		row := make([]any, 2)
		op, err := tt.rules.Map(&sinks.Event{Body: []byte(tt.body), PartitionKey: &key}, row)
		got := show(tt.rules.Columns(), row)
		if err != nil {
			got = "error: " + err.Error()
		}
		if op != tt.op || !strings.HasPrefix(got, tt.want) {
			t.Errorf("body %s: got %s %s, want %s %s", tt.body, op, got, tt.op, tt.want)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	cols := columns(t, "id|$.id|bigint", "name|$.name")
	tests := []struct {
		spec Spec
		want string
	}{
		{Spec{Columns: cols}, ""},
		{Spec{Columns: cols, Format: "xml"}, `format: "xml": want json or debezium`},
		{Spec{Columns: cols, Format: FormatDebezium}, "key: required with format: debezium"},
		{Spec{Columns: cols, Key: []string{"id"}, Delete: &Delete{}}, "delete.when: required"},
		{Spec{Columns: cols, Key: []string{"id"}, Delete: &Delete{When: "$.op = 'd'"}}, "delete.when: column"},
		{Spec{Columns: cols, Key: []string{"id"}, Delete: &Delete{When: "$.op == 'd'", Key: map[string]string{"name": "$.n"}}}, "delete.key.name: not a key column"},
		{Spec{Columns: cols, Key: []string{"id"}, Delete: &Delete{When: "$.op == 'd'", Key: map[string]string{"id": "@nope"}}}, "delete.key.id: unknown metadata source"},
	}
	for _, tt := range tests {
		err := tt.spec.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.spec, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%+v: got %v, want %q", tt.spec, err, tt.want)
		}
	}
}
