package config_test

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ehsink/ehsink/internal/config"
)

// FuzzExpandString: expansion never panics, and text without ${ or $$
// comes back unchanged.
func FuzzExpandString(f *testing.F) {
	for _, s := range []string{"${A}", "${A:-b}", "$$", "$Default", "${A:-${B:-c}}", "${", "${}", "x${A}y${B:-}z", "$${A}"} {
		f.Add(s)
	}
	env := func(k string) string {
		if k == "A" {
			return "a"
		}
		return ""
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := config.ExpandString(s, env)
		if !strings.Contains(s, "${") && !strings.Contains(s, "$$") && (err != nil || got != s) {
			t.Errorf("ExpandString(%q) = %q, %v; want it unchanged", s, got, err)
		}
	})
}

// FuzzParseByteSize: parsing never panics, and what String writes parses
// back to the same size.
func FuzzParseByteSize(f *testing.F) {
	for _, s := range []string{"64MiB", "10MB", "1024", "1.5GiB", "0", "9TiB", " 3 kb "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := config.ParseByteSize(s)
		if err != nil {
			return
		}
		back, err := config.ParseByteSize(n.String())
		if err != nil || back != n {
			t.Errorf("ParseByteSize(%q) = %d; String %q parses to %d, %v", s, n, n.String(), back, err)
		}
	})
}

// FuzzDecode: decoding any YAML document into the sample struct never
// panics, and every problem has a path or a message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"name: x\ncount: 3\nwait: 1s\n",
		"batch: {max_evnts: 1}\n",
		"columns: [{name: a, path: $.a}, {typo: 1}]\n",
		"columns: {a: $.a}\nlabels: {x: [1]}\nparts: {'1': 2}\n",
		"opt:\nsize: 64MiB\nkeys: [a, {b: c}]\nat: 2026-01-01T00:00:00Z\n",
		"- 1\n- 2\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		var raw any
		if yaml.Unmarshal([]byte(doc), &raw) != nil {
			return
		}
		var s sample
		for _, e := range config.Errors(config.Decode(raw, &s)) {
			if e.Err == nil || e.Error() == "" {
				t.Errorf("empty problem %#v", e)
			}
		}
	})
}
