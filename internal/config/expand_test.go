package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/config"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestExpandString(t *testing.T) {
	env := mapEnv(map[string]string{"HOST": "db", "PORT": "5432", "EMPTY": "", "B": "bee"})
	tests := []struct {
		in, want string
		err      string // substring of the error, "" for none
	}{
		{"plain", "plain", ""},
		{"${HOST}", "db", ""},
		{"postgres://${HOST}:${PORT}/app", "postgres://db:5432/app", ""},
		{"${MISSING:-fallback}", "fallback", ""},
		{"${EMPTY:-fallback}", "fallback", ""},
		{"${HOST:-fallback}", "db", ""},
		{"${MISSING:-}", "", ""},
		{"${MISSING:-${B}}", "bee", ""},
		{"${MISSING:-a:-b}", "a:-b", ""},
		{"$Default", "$Default", ""},
		{"$.order_id", "$.order_id", ""},
		{"$$Default", "$Default", ""},
		{"$${HOST}", "${HOST}", ""},
		{"cost $", "cost $", ""},
		{"${MISSING}", "", "environment variable MISSING is not set"},
		{"${EMPTY}", "", "environment variable EMPTY is not set"},
		{"${MISSING:-${ALSO}}", "", "environment variable ALSO is not set"},
		{"${HOST", "", "unterminated ${"},
		{"${1BAD}", "", `invalid variable name "1BAD"`},
		{"${}", "", `invalid variable name ""`},
		{"${A}${B}", "", "environment variable A is not set"},
	}
	for _, tt := range tests {
		got, err := config.ExpandString(tt.in, env)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("ExpandString(%q): %v", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("ExpandString(%q) error %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && got != tt.want:
			t.Errorf("ExpandString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpandTree(t *testing.T) {
	env := mapEnv(map[string]string{"CONN": "Endpoint=sb://x/;SharedAccessKey=SECRET", "N": "7"})
	raw := map[string]any{
		"connectors": []any{
			map[string]any{
				"source": map[string]any{"connection": "${CONN}", "consumer_group": "$Default", "count": 3},
				"sink":   map[string]any{"dsn": "${PG_DSN}", "max": "${N}", "${KEY}": "keys are not expanded"},
			},
		},
	}
	got, err := config.Expand(raw, env)
	errs := config.Errors(err)
	if len(errs) != 1 || errs[0].Path != "connectors[0].sink.dsn" || !strings.Contains(errs[0].Err.Error(), "PG_DSN") {
		t.Fatalf("errors %v, want one at connectors[0].sink.dsn naming PG_DSN", err)
	}
	if strings.Contains(err.Error(), "SECRET") {
		t.Errorf("error shows a secret: %v", err)
	}
	want := map[string]any{
		"connectors": []any{
			map[string]any{
				"source": map[string]any{"connection": "Endpoint=sb://x/;SharedAccessKey=SECRET", "consumer_group": "$Default", "count": 3},
				"sink":   map[string]any{"dsn": "${PG_DSN}", "max": "7", "${KEY}": "keys are not expanded"},
			},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Expand:\n got %#v\nwant %#v", got, want)
	}
	// The input is not modified.
	if raw["connectors"].([]any)[0].(map[string]any)["source"].(map[string]any)["connection"] != "${CONN}" {
		t.Error("Expand modified its input")
	}
}
