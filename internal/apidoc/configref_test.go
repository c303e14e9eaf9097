package apidoc

import (
	"fmt"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
	"github.com/ehsink/ehsink/sinks"
	_ "github.com/ehsink/ehsink/sinks/delta"
	_ "github.com/ehsink/ehsink/sinks/iceberg"
	_ "github.com/ehsink/ehsink/sinks/parquet"
	_ "github.com/ehsink/ehsink/sinks/postgres"
	_ "github.com/ehsink/ehsink/sinks/stdout"
)

// configDoc is the configuration reference, relative to this package.
const configDoc = "../../docs/configuration.md"

// The reference's tables: a Markdown table whose header's first cell is
// "key" lists keys of the file and of a connector; one whose first cell is
// "NAME key" lists the keys of the `sink:` block of sink NAME. The first
// cell of each row holds key paths in backticks: file keys from the top of
// connectors.yaml (`http.listen`), connector keys from a connector of its
// `connectors:` list (`source.batch.max_events`), sink keys with their
// `sink.` (`sink.routes[].when`). One whose first cell is "test file key"
// lists the keys of a test file of `ehsink test` (`tests[].expect[].row`).
const (
	fileSection      = `"### The file" (under "## Configuration reference")`
	connectorSection = `"### A connector" (under "## Configuration reference")`
	sinkSection      = `"### Sinks" (under "## Configuration reference")`
	testFileSection  = `"### Testing a config"`
	testFileTable    = "test file key"
)

// TestConfigurationReference keeps docs/configuration.md and the spec in
// step: every key that connectors.yaml accepts (the key paths of
// connector.Config and of each built-in sink's Config, as config.Decode
// reads them) and every key of a test file (conntest.File) has a row in
// the reference, and every row names a key that exists.
func TestConfigurationReference(t *testing.T) {
	text, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	documented := referenceTables(string(text))
	if len(documented["key"]) == 0 {
		t.Fatalf("docs/configuration.md has no table whose header starts with | key |")
	}

	spec := map[string][]string{
		"key":         connectorKeys(),
		testFileTable: config.KeyPaths(reflect.TypeFor[conntest.File]()),
	}
	for _, name := range (*sinks.Registry)(nil).Names() {
		d, err := (*sinks.Registry)(nil).Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, k := range config.KeyPaths(reflect.TypeOf(d.NewConfig())) {
			keys = append(keys, "sink."+k)
		}
		spec[name+" key"] = keys
	}
	if len(spec) < 5 {
		t.Fatalf("sinks registered: %v; want the three built-in ones", (*sinks.Registry)(nil).Names())
	}

	perConnector := config.KeyPaths(reflect.TypeFor[connector.Spec]())
	for _, table := range slices.Sorted(maps.Keys(spec)) {
		for _, k := range spec[table] {
			if !documented[table][k] {
				t.Errorf("key %s is not documented: add a row starting with | `%s` | to the | %s | default | meaning | table of docs/configuration.md, section %s",
					k, k, table, sectionOf(table, k, perConnector))
			}
		}
	}
	for _, table := range slices.Sorted(maps.Keys(documented)) {
		keys := documented[table]
		want, ok := spec[table]
		want = withParents(want)
		if !ok {
			t.Errorf("docs/configuration.md has a | %s | table, but no sink %q is registered (sinks: %v)", table, strings.TrimSuffix(table, " key"), (*sinks.Registry)(nil).Names())
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if !slices.Contains(want, k) {
				t.Errorf("docs/configuration.md documents `%s` in its | %s | table, but the spec has no such key", k, table)
			}
		}
	}
}

// connectorKeys lists the keys of the file and of a connector: those of a
// connector without their `connectors[].`.
func connectorKeys() []string {
	out := []string{"connectors"}
	for _, k := range config.KeyPaths(reflect.TypeFor[connector.Config]()) {
		out = append(out, strings.TrimPrefix(k, "connectors[]."))
	}
	return out
}

// withParents returns keys and every key that holds one of them
// (`errors.retry` for `errors.retry.max_backoff`, `sink.routes` for
// `sink.routes[].when`): a row may document a whole block.
func withParents(keys []string) []string {
	out := slices.Clone(keys)
	for _, k := range keys {
		for i := range len(k) {
			if k[i] == '.' || strings.HasPrefix(k[i:], "[]") {
				out = append(out, k[:i])
			}
		}
	}
	return out
}

// sectionOf names the section whose table documents key k of table.
func sectionOf(table, k string, perConnector []string) string {
	switch {
	case table == testFileTable:
		return testFileSection
	case table != "key":
		return sinkSection
	case slices.Contains(perConnector, k):
		return connectorSection
	}
	return fileSection
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	listIndex  = regexp.MustCompile(`\[\d+\]`)
)

// referenceTables returns the key paths of each reference table, by the
// table's first header cell ("key", "postgres key").
func referenceTables(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	var table string // the current table's first header cell; "" outside one
	for line := range strings.SplitSeq(text, "\n") {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 3 {
			table = ""
			continue
		}
		first := strings.TrimSpace(cells[1])
		switch {
		case table == "" && (first == "key" || strings.HasSuffix(first, " key")):
			table = first
			if out[table] == nil {
				out[table] = map[string]bool{}
			}
		case table == "", strings.HasPrefix(first, "---"):
		default:
			for _, m := range backticked.FindAllStringSubmatch(first, -1) {
				out[table][m[1]] = true
			}
		}
	}
	return out
}

// TestReferenceTablesParse: the parser reads the format the reference is
// written in, and nothing outside its tables.
func TestReferenceTablesParse(t *testing.T) {
	doc := strings.Join([]string{
		"| key | default | meaning |",
		"|---|---|---|",
		"| `drain_timeout` | `30s` | bound |",
		"| `source.batch.max_events` | `2000` | x `not.a.key` |",
		"",
		"`outside` a table",
		"| postgres key | default | meaning |",
		"|---|---|---|",
		"| `sink.mode` | append | |",
		"| other | x | y |",
		"| `sink.a`, `sink.b` | | |",
	}, "\n")
	got := fmt.Sprint(referenceTables(doc))
	want := "map[key:map[drain_timeout:true source.batch.max_events:true] postgres key:map[sink.a:true sink.b:true sink.mode:true]]"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestReferenceKeysDecode: config.KeyPaths and config.Decode agree on the
// spec. A file that sets every key path (with no value, which keeps the
// default) decodes without a problem, into connector.Config and into each
// built-in sink's Config, so the keys the reference test asks for are
// exactly the keys the loader reads.
func TestReferenceKeysDecode(t *testing.T) {
	check := func(name string, dst any) {
		t.Helper()
		keys := config.KeyPaths(reflect.TypeOf(dst))
		if len(keys) == 0 {
			t.Fatalf("%s: no key paths", name)
		}
		tree := map[string]any{}
		for _, k := range keys {
			setPath(tree, k)
		}
		// A value of a known key may be refused (an empty column mapping);
		// a problem at a path that is not a key path is a key the decoder
		// does not know.
		for _, e := range config.Errors(config.Decode(tree, dst)) {
			if p := listIndex.ReplaceAllString(e.Path, "[]"); !slices.Contains(keys, p) {
				t.Errorf("%s: key path %s does not decode: %v", name, p, e)
			}
		}
	}
	check("connector.Config", &connector.Config{})
	check("conntest.File", &conntest.File{})
	for _, name := range (*sinks.Registry)(nil).Names() {
		d, err := (*sinks.Registry)(nil).Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		check("sink "+name, d.NewConfig())
	}
}

// setPath adds key path p (`a.b[].c`) to tree, with no value at its end;
// a list holds one map.
func setPath(tree map[string]any, p string) {
	head, rest, more := strings.Cut(p, ".")
	list := strings.HasSuffix(head, "[]")
	head = strings.TrimSuffix(head, "[]")
	if !more {
		if list {
			tree[head] = []any{map[string]any{}}
		} else if _, ok := tree[head]; !ok {
			tree[head] = nil
		}
		return
	}
	var sub map[string]any
	if list {
		l, _ := tree[head].([]any)
		if len(l) == 0 {
			l = []any{map[string]any{}}
			tree[head] = l
		}
		sub = l[0].(map[string]any)
	} else {
		sub, _ = tree[head].(map[string]any)
		if sub == nil {
			sub = map[string]any{}
			tree[head] = sub
		}
	}
	setPath(sub, rest)
}
