package mapping

import (
	"errors"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/sinks"
)

func TestColumnsUnmarshalConfig(t *testing.T) {
	tests := []struct {
		name string
		raw  any
		want string // name:source:type:nullable, comma separated
	}{
		{
			name: "short form sorted by name",
			raw:  map[string]any{"order_id": "$.order_id", "amount": "$.amount", "seq": "@sequence_number"},
			want: "amount:$.amount:string:true,order_id:$.order_id:string:true,seq:@sequence_number:int64:false",
		},
		{
			name: "long form",
			raw: map[string]any{
				"amount": map[string]any{"from": "$.amount", "type": "numeric(12,2)", "nullable": false},
				"id":     map[string]any{"from": "$.id", "type": "bigint", "nullable": "true"},
			},
			want: "amount:$.amount:decimal(12,2):false,id:$.id:int64:true",
		},
		{
			name: "list form keeps order",
			raw: []any{
				map[string]any{"name": "z", "from": "$.z", "type": "uuid"},
				map[string]any{"name": "a", "from": "@enqueued_time"},
			},
			want: "z:$.z:uuid:true,a:@enqueued_time:timestamp:false",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs Columns
			if err := cs.UnmarshalConfig(tt.raw); err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, c := range cs {
				parts = append(parts, strings.Join([]string{c.Name, c.From.String(), c.Type.String(), map[bool]string{true: "true", false: "false"}[c.Nullable]}, ":"))
			}
			if got := strings.Join(parts, ","); got != tt.want {
				t.Fatalf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestColumnsUnmarshalConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		raw    any
		fields []string
	}{
		{"not a map", "x", nil},
		{"empty", map[string]any{}, nil},
		{"bad type and source", map[string]any{
			"a": map[string]any{"from": "$.a", "type": "varchar2"},
			"b": "b.c",
			"c": map[string]any{"type": "text", "colour": "red"},
		}, []string{"a.type", "b.from", "c.colour", "c.from"}},
		{"list errors", []any{
			map[string]any{"from": "$.a"},
			"$.b",
			map[string]any{"name": "x", "from": "$.x", "nullable": 3},
		}, []string{"[0].name", "[1]", "[2].nullable"}},
		{"duplicate", []any{
			map[string]any{"name": "a", "from": "$.a"},
			map[string]any{"name": "a", "from": "$.b"},
		}, []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs Columns
			err := cs.UnmarshalConfig(tt.raw)
			if err == nil {
				t.Fatalf("no error for %v", tt.raw)
			}
			for _, f := range tt.fields {
				if !hasField(err, f) {
					t.Errorf("error %q does not name field %q", err, f)
				}
			}
		})
	}
}

func hasField(err error, field string) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if hasField(e, field) {
				return true
			}
		}
		return false
	}
	var fe *sinks.FieldError
	return errors.As(err, &fe) && fe.Field == field
}
