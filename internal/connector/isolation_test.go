package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/testenv"
	_ "github.com/ehsink/ehsink/sinks/parquet"
	_ "github.com/ehsink/ehsink/sinks/postgres"
)

// TestSinkDownAtStartIsolated starts one process with a PostgreSQL
// connector and a Parquet connector while PostgreSQL is down. The Parquet
// connector must serve every event meanwhile; the PostgreSQL connector must
// wait (holding no partition, its state sink_unavailable), then write every
// event once the server is back, without a restart of anything.
func TestSinkDownAtStartIsolated(t *testing.T) {
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Start() })
	dir := t.TempDir()
	const events = 600
	source := `{connection: emulator, eventhub: orders, CG batch: {max_events: 100, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}`
	yaml := `
drain_timeout: 10s
emulator:
  hubs: {orders: 2}
  consumer_groups: [parquet]
  demo: {eventhub: orders, count: ` + strconv.Itoa(events) + `, rate: 100000, keys: 20}
connectors:
  - name: to-postgres
    source: ` + strings.Replace(source, "CG ", "", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {retry: {initial_backoff: 50ms, max_backoff: 500ms}}
` + ordersSinkYAML(dsn) + `
  - name: to-parquet
    source: ` + strings.Replace(source, "CG ", "consumer_group: parquet, ", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    sink:
      type: parquet
      dir: ` + filepath.Join(dir, "parquet") + `
      max_rows: 100
      max_age: 500ms
      columns:
        - {name: order_id, from: $.order_id, type: string}
`
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	dups := &dupKeys{}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(dups.handler()), DevEnv: devenv.New()})
	defer stop()

	committed := func(name string) float64 {
		return sumMetric(t, reg, "ehsink_events_committed_total", name)
	}
	waitUntil(t, ctx, done, "the Parquet connector commits every event while PostgreSQL is down", func() bool {
		return committed("to-parquet") >= events
	})
	if got := committed("to-postgres"); got != 0 {
		t.Fatalf("the PostgreSQL connector committed %v events while its server was down", got)
	}
	if v := stateOf(t, reg, "to-postgres"); v != "sink_unavailable" {
		t.Errorf("ehsink_connector_state of to-postgres is %q, want sink_unavailable", v)
	}
	if v := stateOf(t, reg, "to-parquet"); v != "running" {
		t.Errorf("ehsink_connector_state of to-parquet is %q, want running", v)
	}
	if owned := sumMetric(t, reg, "ehsink_partitions_owned", "to-postgres"); owned != 0 {
		t.Errorf("the PostgreSQL connector owns %v partitions while its sink is down", owned)
	}

	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, ctx, done, "the PostgreSQL connector writes every event once its server is back", func() bool {
		return committed("to-postgres") >= events
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, distinct int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM public.orders`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != events || distinct != events {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct events), want %d", rows, distinct, events)
	}
	if lines := dups.found(); len(lines) > 0 {
		t.Errorf("%d log lines carry an attribute twice, e.g. %s", len(lines), lines[0])
	}
}

// dupKeys collects log lines that carry an attribute key twice (for
// example connector=X connector=X, once from the logger and once from the
// call).
type dupKeys struct {
	mu    sync.Mutex
	lines []string
}

func (d *dupKeys) handler() slog.Handler { return dupHandler{d: d} }

func (d *dupKeys) found() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.lines)
}

type dupHandler struct {
	d      *dupKeys
	prefix string
	keys   []string // keys added by WithAttrs, with their group prefix
}

func (h dupHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h dupHandler) Handle(_ context.Context, r slog.Record) error {
	seen := map[string]bool{}
	var twice []string
	add := func(k string) {
		if seen[k] {
			twice = append(twice, k)
		}
		seen[k] = true
	}
	for _, k := range h.keys {
		add(k)
	}
	r.Attrs(func(a slog.Attr) bool {
		add(h.prefix + a.Key)
		return true
	})
	if len(twice) > 0 {
		h.d.mu.Lock()
		h.d.lines = append(h.d.lines, fmt.Sprintf("%q repeats %v", r.Message, twice))
		h.d.mu.Unlock()
	}
	return nil
}

func (h dupHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	keys := slices.Clone(h.keys)
	for _, a := range attrs {
		keys = append(keys, h.prefix+a.Key)
	}
	return dupHandler{d: h.d, prefix: h.prefix, keys: keys}
}

func (h dupHandler) WithGroup(name string) slog.Handler {
	return dupHandler{d: h.d, prefix: h.prefix + name + ".", keys: h.keys}
}

// sumMetric sums a metric family's values for one connector.
func sumMetric(t *testing.T, reg *prometheus.Registry, name, conn string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "connector" && l.GetValue() == conn {
					total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return total
}

// stateOf returns the state ehsink_connector_state gives a connector.
func stateOf(t *testing.T, reg *prometheus.Registry, conn string) string {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "ehsink_connector_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["connector"] == conn && m.GetGauge().GetValue() == 1 {
				return labels["state"]
			}
		}
	}
	return ""
}

// runInBackground runs connector.Run with opts in a goroutine: done
// receives its result, stop cancels it.
func runInBackground(ctx context.Context, cfg *connector.Config, opts connector.RunOptions) (done chan error, stop context.CancelFunc) {
	runCtx, stop := context.WithCancel(ctx)
	done = make(chan error, 1)
	go func() { done <- connector.Run(runCtx, cfg, opts) }()
	return done, stop
}

// waitUntil polls cond until it holds; Run returning or ctx ending first
// fails the test.
func waitUntil(t *testing.T, ctx context.Context, done <-chan error, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case err := <-done:
			t.Fatalf("Run returned %v while waiting until %s", err, what)
		case <-ctx.Done():
			t.Fatalf("gave up waiting until %s", what)
		case <-tick.C:
		}
	}
}

// loadWithMetrics writes yaml as dir/connectors.yaml, loads it, and makes
// the connector metrics on a registry of their own.
func loadWithMetrics(t *testing.T, dir, yaml string) (*connector.Config, *prometheus.Registry, *connector.Metrics) {
	t.Helper()
	path := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := connector.Load(path, connector.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met, err := connector.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, reg, met
}
