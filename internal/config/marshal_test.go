package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"go.yaml.in/yaml/v3"
)

type printed struct {
	Name   string            `yaml:"name"`
	Conn   secret.String     `yaml:"connection"`
	Empty  secret.String     `yaml:"empty"`
	Wait   time.Duration     `yaml:"wait"`
	Size   config.ByteSize   `yaml:"size"`
	Keys   []string          `yaml:"keys"`
	None   []string          `yaml:"none"`
	Labels map[string]string `yaml:"labels"`
	Opt    *batch            `yaml:"opt"`
	Set    *batch            `yaml:"set"`
	Any    any               `yaml:"any"`
	Unused []string          `yaml:"unused,omitempty"`
	Used   []string          `yaml:"used,omitempty"`
	Zero   time.Duration     `yaml:"zero,omitempty"`
	Inline any               `yaml:",inline"`
}

func TestMarshal(t *testing.T) {
	v := printed{
		Name:   "true", // must be quoted to stay a string
		Conn:   "Endpoint=sb://x/;SharedAccessKey=SECRET",
		Wait:   90 * time.Second,
		Size:   64 << 20,
		Keys:   []string{"a", "b"},
		Labels: map[string]string{"z": "1", "a": "$.x"},
		Set:    &batch{MaxEvents: 5, MaxWait: time.Second},
		Used:   []string{"x"},
		Inline: &struct {
			Table string        `yaml:"table"`
			DSN   secret.String `yaml:"dsn"`
		}{"orders", "postgres://u:hunter2@h/db"},
	}
	b, err := config.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out := string(b)
	for _, leak := range []string{"SECRET", "hunter2"} {
		if strings.Contains(out, leak) {
			t.Errorf("output shows %q:\n%s", leak, out)
		}
	}
	var got map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	want := map[string]any{
		"name": "true", "connection": "***", "empty": "", "wait": "1m30s", "size": "64MiB",
		"keys": []any{"a", "b"}, "none": []any{}, "labels": map[string]any{"a": "$.x", "z": "1"},
		"set":   map[string]any{"max_events": 5, "max_wait": "1s"},
		"used":  []any{"x"}, // unused and zero are omitempty and empty
		"table": "orders", "dsn": "***",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Marshal:\n%s\n got %#v\nwant %#v", out, got, want)
	}
	// Field order follows the struct; the inline keys come last.
	if i, j := strings.Index(out, "name:"), strings.Index(out, "table:"); i < 0 || j < i {
		t.Errorf("order:\n%s", out)
	}
	// What Marshal writes, Decode reads back (secrets aside).
	var back struct {
		printed `yaml:",inline"`
		Table   string `yaml:"table"`
		DSN     string `yaml:"dsn"`
	}
	if err := config.Decode(got, &back); err != nil {
		t.Fatalf("Decode(Marshal(v)): %v", err)
	}
	if back.Wait != v.Wait || back.Size != v.Size || back.Opt != nil || *back.Set != *v.Set {
		t.Errorf("round trip: %+v", back)
	}
}
