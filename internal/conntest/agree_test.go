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
)

// TestRefusesWhatTheSinkRefuses: an event the running sink dead-letters
// for its destination (a rendered table that is not an identifier, a path
// value that climbs out of its folder) is a dead letter in `ehsink test`
// too, with the sink's reason, and a config the sink refuses (a literal
// table named by two routes) is refused before any case runs.
func TestRefusesWhatTheSinkRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfgPath := write("connectors.yaml", `
emulator: {hubs: {events: 1}}
connectors:
  - name: pg
    source: {connection: emulator, eventhub: events}
    sink:
      type: postgres
      dsn: postgres://ehsink@localhost:5432/ehsink
      routes:
        - {table: "events_{$.type}", columns: {n: {from: $.n, type: bigint}}}
  - name: pq
    source: {connection: emulator, eventhub: events}
    sink:
      type: parquet
      dir: `+filepath.Join(dir, "out")+`
      routes:
        - {path: "kind={$.kind}/{partition}-{first_seq}-{last_seq}.parquet", columns: {n: {from: $.n, type: int64}}}
`)
	testPath := write("connectors_test.yaml", `
tests:
  - name: a table that is not an identifier
    connector: pg
    events: [{body: {n: 1, type: "clicks; drop table x"}}, {body: {n: 2, type: clicks}}]
    expect:
      - dead_letter: 'table "events_clicks; drop table x": "events_clicks; drop table x" is not an identifier'
      - {table: events_clicks, row: {n: 2}}
  - name: a path value that climbs out of its folder
    connector: pq
    events: [{body: {n: 1, kind: ../../etc}}, {body: {n: 2, kind: a}}]
    expect:
      - dead_letter: '{$.kind} is "../../etc": starts with . or _'
      - row: {n: 2}
`)
	res, out, err := runFile(t, cfgPath, testPath)
	if err != nil || res.Failed != 0 || res.Cases != 2 {
		t.Fatalf("result %+v, err %v; report:\n%s", res, err, out)
	}

	// The running Parquet sink, built from the same config, dead-letters
	// the same event with the same reason.
	cfg := loadConfig(t, cfgPath)
	var pq *connector.Spec
	for i := range cfg.Connectors {
		if cfg.Connectors[i].Name == "pq" {
			pq = &cfg.Connectors[i]
		}
	}
	d, err := (*sinks.Registry)(nil).Lookup(pq.Sink.Type)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.New(context.Background(), pq.Sink.Config, sinks.Info{Connector: "pq", EventHub: "events"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	w, _, err := s.Open(context.Background(), "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(context.Background())
	events := []sinks.Event{{Partition: "0", SequenceNumber: 0, Offset: "0", EnqueuedTime: DefaultEnqueuedTime, Body: []byte(`{"n": 1, "kind": "../../etc"}`)}}
	var be *sinks.BatchError
	if err := w.Write(context.Background(), events); !errors.As(err, &be) || len(be.Failed) != 1 {
		t.Fatalf("the parquet sink's Write: %v, want the event failed", err)
	}
	target, err := newTarget(pq)
	if err != nil {
		t.Fatal(err)
	}
	if got := target.apply(context.Background(), &events[0]); got.reason != be.Failed[0].Err.Error() {
		t.Errorf("ehsink test's reason %q, the sink's %q", got.reason, be.Failed[0].Err)
	}

	// One literal table, two routes: refused by the config check that
	// `run` and `validate` make, so `ehsink test` runs nothing.
	shared := write("shared.yaml", `
emulator: {hubs: {events: 1}}
connectors:
  - name: pg
    source: {connection: emulator, eventhub: events}
    sink:
      type: postgres
      dsn: postgres://ehsink@localhost:5432/ehsink
      routes:
        - {name: a, when: "$.n > 1", table: events, columns: {n: {from: $.n, type: bigint}}}
        - {name: b, table: events, columns: {m: {from: $.m, type: text}}}
`)
	_, _, err = runFile(t, shared, testPath)
	if err == nil || !strings.Contains(err.Error(), "table events is also the table of route a") {
		t.Errorf("a literal table shared by two routes: %v, want it refused", err)
	}
}
