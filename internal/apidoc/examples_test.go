package apidoc

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
)

// foreignMark, on the line before a ```yaml fence, says the block is YAML
// of another program (a Prometheus rule file): it is only parsed.
const foreignMark = "<!-- not ehsink configuration"

// docVars are the values of the ${VAR} references the examples use, each
// of the shape its key wants, so that an example loads as it would with
// real secrets. A variable not listed is unset, and the example then fails.
var docVars = map[string]string{
	"EVENTHUB_CONNECTION": "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders",
	"STORAGE_CONNECTION":  "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net",
	"PG_DSN":              "postgres://ehsink@db.example.com:5432/orders",
	"U":                   "user",
	"P":                   "password",
}

// docBlock is one ```yaml block of a Markdown file.
type docBlock struct {
	file    string // relative to the repository
	line    int    // of the opening fence
	text    string
	foreign bool // marked with foreignMark
}

// TestDocYAMLExamples loads every ```yaml block of README.md and docs/*.md
// as `ehsink validate` and `ehsink test` would, so that an example that
// cannot be pasted as written fails here (docs/configuration.md's Avro
// example once wrote `type: numeric(12,2)` unquoted in a flow mapping,
// which YAML reads as two keys). The rule, by the block's top-level keys:
//
//   - `connectors:`: a whole connectors.yaml, loaded by connector.Load
//     with every check;
//   - `tests:`: a whole test file, read by conntest.ReadFile;
//   - anything else is a part of one connector (or, starting with `- `, of
//     the connectors list), as the docs show the keys a section is about:
//     it is put under `connectors:` and loaded by connector.Load, and every
//     problem at a key the block writes (or under it) fails the test; the
//     problems about keys it leaves out (a required dsn, the checkpoint)
//     are what a fragment is allowed;
//   - a block whose fence follows a line starting with foreignMark is
//     another program's YAML and must only parse.
func TestDocYAMLExamples(t *testing.T) {
	blocks := docYAMLBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("found %d yaml blocks in README.md and docs/*.md; the extraction is broken", len(blocks))
	}
	getenv := func(name string) string { return docVars[name] }
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", b.file, b.line), func(t *testing.T) {
			text := dedent(b.text)
			tree, err := parseYAMLShape(text)
			if err != nil {
				t.Fatalf("not YAML: %v\n%s", err, text)
			}
			if b.foreign {
				return
			}
			top, _ := tree.(map[string]any)
			path := filepath.Join(t.TempDir(), "example.yaml")
			switch {
			case top != nil && top["connectors"] != nil:
				writeFile(t, path, text)
				if _, err := connector.Load(path, connector.LoadOptions{Getenv: getenv}); err != nil {
					t.Errorf("does not load as a connectors.yaml:\n%v\n%s", err, text)
				}
			case top != nil && top["tests"] != nil:
				writeFile(t, path, text)
				if _, err := conntest.ReadFile(path); err != nil {
					t.Errorf("does not read as a test file:\n%v\n%s", err, text)
				}
			default:
				wrapped := wrapFragment(text)
				shape, err := parseYAMLShape(wrapped)
				if err != nil {
					t.Fatalf("not YAML under connectors: %v\n%s", err, wrapped)
				}
				written := map[string]bool{}
				keyPaths("", shape, written)
				writeFile(t, path, wrapped)
				_, err = connector.Load(path, connector.LoadOptions{
					Getenv: getenv,
					Ignore: func(p string) bool { return !writtenAt(p, written) },
				})
				if err != nil {
					t.Errorf("a key of this part of a connector does not load:\n%v\n%s", err, text)
				}
			}
		})
	}
}

// TestDocYAMLExamplesCatch: the rule of TestDocYAMLExamples catches the
// mistake it was written for, and lets a fragment leave keys out.
func TestDocYAMLExamplesCatch(t *testing.T) {
	for _, tc := range []struct {
		name, fragment string
		ok             bool
	}{
		{"unquoted comma in a flow mapping", "sink:\n  type: postgres\n  columns: {amount: {from: $.amount, type: numeric(12,2)}}\n", false},
		{"quoted", "sink:\n  type: postgres\n  columns: {amount: {from: $.amount, type: \"numeric(12,2)\"}}\n", true},
		{"misspelt key with a map value", "sink:\n  type: postgres\n  colums: {amount: $.amount}\n", false},
		{"list item", "- name: orders\n  filter:\n    keep: \"$.type == 'a'\"\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrapped := wrapFragment(tc.fragment)
			shape, err := parseYAMLShape(wrapped)
			if err != nil {
				t.Fatal(err)
			}
			written := map[string]bool{}
			keyPaths("", shape, written)
			path := filepath.Join(t.TempDir(), "example.yaml")
			writeFile(t, path, wrapped)
			_, err = connector.Load(path, connector.LoadOptions{
				Getenv: func(name string) string { return docVars[name] },
				Ignore: func(p string) bool { return !writtenAt(p, written) },
			})
			if (err == nil) != tc.ok {
				t.Errorf("load error %v, want ok=%v\n%s", err, tc.ok, wrapped)
			}
		})
	}
}

// docYAMLBlocks returns the ```yaml blocks of README.md and docs/*.md.
func docYAMLBlocks(t *testing.T) []docBlock {
	t.Helper()
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var out []docBlock
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(filepath.ToSlash(f), "../../")
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			info, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
			if !ok {
				continue
			}
			start := i
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			}
			if lang, _, _ := strings.Cut(info, " "); lang != "yaml" && lang != "yml" {
				continue
			}
			out = append(out, docBlock{
				file:    name,
				line:    start + 1,
				text:    strings.Join(lines[start+1:min(i, len(lines))], "\n") + "\n",
				foreign: start > 0 && strings.HasPrefix(strings.TrimSpace(lines[start-1]), foreignMark),
			})
		}
	}
	return out
}

// dedent removes the indentation every non-blank line shares (the docs
// show a connector's keys at the depth they have in a connectors list).
func dedent(text string) string {
	lines := strings.Split(text, "\n")
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if common < 0 || n < common {
			common = n
		}
	}
	for i, l := range lines {
		if len(l) >= common && common > 0 {
			lines[i] = l[common:]
		}
	}
	return strings.Join(lines, "\n")
}

// wrapFragment puts a part of a connector (or of the connectors list) under
// `connectors:`.
func wrapFragment(text string) string {
	var b strings.Builder
	b.WriteString("connectors:\n")
	first := true
	listed := false
	for l := range strings.SplitSeq(strings.TrimRight(text, "\n"), "\n") {
		trimmed := strings.TrimSpace(l)
		if first && trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			first = false
			listed = strings.HasPrefix(l, "- ")
			if !listed {
				b.WriteString("  - " + l + "\n")
				continue
			}
		}
		if listed {
			b.WriteString("  " + l + "\n")
		} else {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

// varRef is a ${VAR} reference, which YAML's flow style cannot hold as it
// is; connector.Load's parser accepts it, and parseYAMLShape replaces it.
var varRef = regexp.MustCompile(`\$\{[^}\n]*\}`)

// parseYAMLShape parses text for its shape (keys and nesting), with each
// ${VAR} reference standing as a plain word.
func parseYAMLShape(text string) (any, error) {
	var v any
	err := yaml.Unmarshal([]byte(varRef.ReplaceAllString(text, "VAR")), &v)
	return v, err
}

// keyPaths adds to out the config path (`connectors[0].sink.columns.id`) of
// every key and list element v holds, under prefix: false for a map or a
// list, true for a scalar (a leaf).
func keyPaths(prefix string, v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := config.JoinPath(prefix, k)
			out[p] = isLeaf(child)
			keyPaths(p, child, out)
		}
	case []any:
		for i, child := range v {
			p := fmt.Sprintf("%s[%d]", prefix, i)
			out[p] = isLeaf(child)
			keyPaths(p, child, out)
		}
	}
}

// writtenAt reports whether a problem's path is a key the fragment writes,
// or under a value it writes whole (a scalar). A problem about another key
// of a map the fragment writes (`sink.dsn: required` beside its
// `sink.columns`) is not the fragment's.
func writtenAt(path string, written map[string]bool) bool {
	if _, ok := written[path]; ok {
		return !slices.Contains([]string{"connectors", "connectors[0]"}, path)
	}
	for p := path; ; {
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return false
		}
		p = p[:i]
		if leaf, ok := written[p]; ok {
			return leaf
		}
	}
}

func isLeaf(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return false
	}
	return true
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
