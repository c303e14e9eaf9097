package conntest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// customConfig is a custom sink's config with a column mapping, which it
// offers `ehsink test` through its TableShape method.
type customConfig struct {
	Table   string        `yaml:"table"`
	Columns table.Columns `yaml:"columns"`
}

func (c *customConfig) TableShape() (table.Shape, error) {
	return table.Shape{Routes: []table.Route{{Name: c.Table, Dest: c.Table, Columns: c.Columns}}}, nil
}

// plainConfig is a custom sink's config without one.
type plainConfig struct {
	Dir string `yaml:"dir"`
}

type customDriver struct{ newConfig func() any }

func (d customDriver) NewConfig() any { return d.newConfig() }

func (customDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return nil, errors.New("never built by ehsink test")
}

func TestCustomSink(t *testing.T) {
	var reg sinks.Registry
	reg.Register("custom", customDriver{func() any { return &customConfig{} }})
	reg.Register("plain", customDriver{func() any { return &plainConfig{} }})
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cfgPath := write("connectors.yaml", `
emulator: {hubs: {h: 1}}
connectors:
  - name: mapped
    source: {connection: emulator, eventhub: h}
    sink: {type: custom, table: t, columns: {n: {from: $.n, type: bigint}}}
  - name: unmapped
    source: {connection: emulator, eventhub: h}
    sink: {type: plain, dir: x}
  - name: unset
    source: {connection: emulator, eventhub: h}
    sink: {type: custom, table: t}
`)
	cfg, err := connector.Load(cfgPath, connector.LoadOptions{Registry: &reg, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	run := func(text string) (Result, string, error) {
		f, err := ReadFile(write("connectors_test.yaml", text))
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		res, err := Run(t.Context(), cfg, "connectors_test.yaml", f, &out)
		return res, out.String(), err
	}
	res, out, err := run(`
tests:
  - name: n
    connector: mapped
    events: [{body: {n: 5}}, {body: {n: five}}]
    expect: [{row: {n: 6}}, {dead_letter: 'column "n"'}]
`)
	if err != nil || res.Failed != 1 || !strings.Contains(out, "column n: want 6, got 5") {
		t.Errorf("mapped custom sink: result %+v, err %v, report:\n%s", res, err, out)
	}
	_, _, err = run(`
tests:
  - name: n
    connector: unmapped
    events: [{body: x}]
    expect: [{dead_letter: x}]
`)
	if got := problemPaths(t, err); len(got) != 1 || got[0] != "tests[0].connector" || !strings.Contains(err.Error(), "has no table mapping to test") {
		t.Errorf("a sink without columns: %v", err)
	}
	// A sink whose columns are optional and left unset has no mapping
	// either: the same message, not "at least one column is required".
	_, _, err = run(`
tests:
  - name: n
    connector: unset
    events: [{body: x}]
    expect: [{dead_letter: x}]
`)
	if err == nil || !strings.Contains(err.Error(), `connector "unset": the sink (type custom) has no table mapping to test`) {
		t.Errorf("a sink with its optional columns unset: %v", err)
	}
}
