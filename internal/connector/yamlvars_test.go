package connector

import (
	"reflect"
	"testing"
)

func TestVarSafeYAML(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]any
	}{
		{"flow map", `blob: {connection: ${STORAGE}, container: c}`,
			map[string]any{"blob": map[string]any{"connection": "${STORAGE}", "container": "c"}}},
		{"flow list and default with braces", `keys: [${A:-x}, "${B:-{y}}", plain]`,
			map[string]any{"keys": []any{"${A:-x}", "${B:-{y}}", "plain"}}},
		{"inside text and escaped", "dsn: postgres://${U}:${P}@h/db\nlit: $${NOT}\ngroup: $Default",
			map[string]any{"dsn": "postgres://${U}:${P}@h/db", "lit": "$${NOT}", "group": "$Default"}},
		{"in a key", `cols: {${K}: $.x}`, map[string]any{"cols": map[string]any{"${K}": "$.x"}}},
		{"many", "a: [${V0},${V1},${V2},${V3},${V4},${V5},${V6},${V7},${V8},${V9},${V10},${V11}]",
			map[string]any{"a": []any{"${V0}", "${V1}", "${V2}", "${V3}", "${V4}", "${V5}", "${V6}", "${V7}", "${V8}", "${V9}", "${V10}", "${V11}"}}},
		{"unterminated stays as written", "a: \"${X\"", map[string]any{"a": "${X"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := varSafeYAML{}.Unmarshal([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
	if _, err := (varSafeYAML{}).Unmarshal([]byte("a: [${X}")); err == nil {
		t.Error("broken YAML: no error")
	}
}
