package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTestCommand runs `ehsink test` over the shipped config and its tests
// (connectors_test.yaml found by its default name) and over the package's
// passing, failing and malformed files, for the exit status of each.
func TestTestCommand(t *testing.T) {
	root := ".."
	data := filepath.Join(root, "internal", "conntest", "testdata")
	cfg := filepath.Join(data, "connectors.yaml")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string // a substring of stdout
		stderr string // a substring of stderr
	}{
		{"shipped", []string{"-c", filepath.Join(root, "connectors.yaml")}, exitOK, "cases passed", ""},
		{"debezium example", []string{"-c", filepath.Join(root, "examples", "debezium", "connectors.yaml")}, exitOK, "4 cases passed", ""},
		{"pass", []string{"-c", cfg, "--tests", filepath.Join(data, "pass.yaml")}, exitOK, "4 cases passed", ""},
		{"fail", []string{"-c", cfg, "--tests", filepath.Join(data, "fail.yaml")}, exitFailure, "column amount: want 12.49, got 12.50", ""},
		{"malformed", []string{"-c", cfg, "--tests", filepath.Join(data, "malformed.yaml")}, exitUsage, "", "tests[0].connector: unknown connector"},
		{"no test file", []string{"-c", cfg}, exitUsage, "", "connectors_test.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := cli(t, append([]string{"test"}, tc.args...)...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d (want %d), stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
		})
	}
}

// TestTestCommandNeedsNoSource: `ehsink test` connects to nothing, so a
// connector's source and checkpoint may read variables that are not set
// (EVENTHUB_CONNECTION); `validate`, which checks what `run` uses, reports
// each such variable once, as one line.
func TestTestCommandNeedsNoSource(t *testing.T) {
	const unset = "EHSINK_TEST_NEVER_SET_CONNECTION"
	t.Setenv(unset, "")
	cfg := writeConfig(t, `
connectors:
  - name: orders
    source: {connection: "${`+unset+`}"}
    checkpoint: {blob: {connection: "${`+unset+`}", container: checkpoints}}
    sink: {type: stdout, format: raw}
`)
	tests := filepath.Join(filepath.Dir(cfg), "connectors_test.yaml")
	if err := os.WriteFile(tests, []byte(`
tests:
  - name: raw
    connector: orders
    events: [{body: '{"a": 1}'}]
    expect: [{record: '{"a": 1}'}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, "test", "-c", cfg); code != exitOK || !strings.Contains(out, "1 case passed") {
		t.Errorf("test: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, _, errOut := cli(t, "validate", "-c", cfg)
	want := []string{
		"connectors[0].checkpoint.blob.connection: environment variable " + unset + " is not set",
		"connectors[0].source.connection: environment variable " + unset + " is not set",
	}
	var got []string
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "  ") {
			got = append(got, strings.TrimSpace(l))
		}
	}
	if code != exitUsage || len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) || !strings.HasPrefix(got[1], want[1]) {
		t.Errorf("validate: exit %d, problems %q; want exit 2 and one line per unset variable:\n%s", code, got, errOut)
	}
}

// TestTestCommandShowsAutoColumns: `ehsink test` over a connector with
// columns: auto prints, before its cases, the columns it derives from
// the schemas its events name: v1's fields, then the channel v2 adds.
func TestTestCommandShowsAutoColumns(t *testing.T) {
	cfg := writeConfig(t, `
emulator: {hubs: {orders: 2}}
connectors:
  - name: orders-auto
    source: {connection: emulator, eventhub: orders, format: avro, registry: {type: azure, group: shop, subject: shop.Order}}
    sink: {type: postgres, dsn: postgres://ehsink@localhost:5432/ehsink, table: orders, columns: auto}
`)
	dir := filepath.Dir(cfg)
	for _, v := range []string{"order-v1.avsc", "order-v2.avsc"} {
		b, err := os.ReadFile(filepath.Join("..", "internal", "conntest", "testdata", v))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, v), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "connectors_test.yaml"), []byte(`
tests:
  - name: v1 then v2
    connector: orders-auto
    events:
      - {avro_schema: order-v1.avsc, body: {id: 8, amount: 1, placed: 0, ref: 7d444840-9dc0-11d1-b245-5ffdce74fad2, note: hi}}
      - {avro_schema: order-v2.avsc, body: {id: 9, amount: 2.5, placed: 0, ref: 7d444840-9dc0-11d1-b245-5ffdce74fad2, channel: app}}
    expect:
      - row: {id: 8, note: hi, channel: null}
      - row: {id: 9, note: null, channel: app}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "test", "-c", cfg)
	want := "connector orders-auto: columns: auto derives\n" +
		"  - {name: partition, from: \"@partition\", type: string, nullable: false}\n" +
		"  - {name: seq, from: \"@sequence_number\", type: int64, nullable: false}\n" +
		"  - {name: enqueued_at, from: \"@enqueued_time\", type: timestamp, nullable: false}\n" +
		"  - {name: id, from: \"$.id\", type: int64, nullable: true}\n"
	if code != exitOK || !strings.Contains(out, want) || !strings.Contains(out, "  - {name: note, from: \"$.note\", type: string, nullable: true}\n  - {name: channel, from: \"$.channel\", type: string, nullable: true}\n") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s\nwant the derived columns, v1's then channel", code, out, errOut)
	}
}
