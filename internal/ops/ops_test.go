package ops_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/ops"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	_ "github.com/ehsink/ehsink/sinks/postgres"
)

// rig is a connector moving events from the emulator into PostgreSQL,
// with the operations API in front of it, as `ehsink run --http` wires them.
type rig struct {
	base     string // http://ADDR of the API
	pg       *testenv.PostgresInstance
	dsn      string
	producer *azeventhubs.ProducerClient
	reg      *prometheus.Registry
	emu      *emulator.Server
	token    string // the API's bearer token, if set
}

const partitions = 2

// jsonOrders is the rig's connector unless a test gives its own: JSON
// order events into a table it creates.
const jsonOrders = `
    sink:
      type: postgres
      dsn: "${DSN}"
      table: orders
      create_table: true
      columns:
        order_id: {from: $.order_id, type: text}
        part: {from: "@partition", type: text}
        seq: {from: "@sequence_number", type: bigint}
`

// rigSetup varies the rig: with registry the emulator serves its schema
// registry; token guards the API; source holds more keys of the
// connector's source, connector its keys after its source and checkpoint
// (in both, ${DSN}, ${REGISTRY} and ${CA} are replaced); before runs
// before the connector starts. sharedPostgres takes a database of the
// package's shared server instead of a server of the rig's own (which a
// test may stop).
type rigSetup struct {
	registry          bool
	token             string
	source, connector string
	before            func(r *rig)
	sharedPostgres    bool
}

func startRig(t *testing.T, ctx context.Context) *rig {
	return startRigWith(t, ctx, rigSetup{connector: jsonOrders})
}

func startRigWith(t *testing.T, ctx context.Context, setup rigSetup) *rig {
	t.Helper()
	ecfg := emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}}
	if setup.registry {
		ecfg.SchemaRegistryAddr = "127.0.0.1:0"
	}
	srv, err := emulator.Start(ctx, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	var pg *testenv.PostgresInstance
	if setup.sharedPostgres {
		pg = testenv.Postgres(t)
	} else {
		pg = testenv.NewPostgres(t)
	}
	dsn := pg.NewDatabase(t)
	conn := srv.ConnectionString("orders")
	work := t.TempDir()
	cfgPath := filepath.Join(work, "connectors.yaml")
	ca := filepath.Join(work, "emulator.pem")
	if err := os.WriteFile(ca, srv.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("${DSN}", dsn, "${REGISTRY}", "https://"+srv.SchemaRegistryAddr(), "${CA}", ca).Replace
	sink := fill(setup.connector)
	if err := os.WriteFile(cfgPath, []byte(`
drain_timeout: 20s
http: {lag_interval: 500ms}
connectors:
  - name: orders-pg
    source:
      connection: "`+conn+`"
      batch: {max_events: 50, max_wait: 200ms}
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}`+fill(setup.source)+`
    checkpoint: {file: {dir: `+filepath.Join(work, "checkpoints")+`}}`+sink+`    errors:
      retry: {initial_backoff: 100ms, max_backoff: 500ms}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := connector.Load(cfgPath, connector.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met, err := connector.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	control := connector.NewControl()
	reg.MustRegister(ops.NewCollector(control))
	api, err := ops.Serve("127.0.0.1:0", ops.Options{Control: control, Gatherer: reg, Pprof: true, Token: secret.String(setup.token)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{base: "http://" + api.Addr().String(), pg: pg, dsn: dsn, reg: reg, emu: srv, token: setup.token}
	if setup.before != nil {
		setup.before(r)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var runErr error
	go func() {
		defer wg.Done()
		runErr = connector.Run(runCtx, cfg, connector.RunOptions{Metrics: met, Control: control, DevEnv: devenv.New()})
	}()
	t.Cleanup(func() {
		stop()
		wg.Wait()
		if runErr != nil {
			t.Errorf("connector.Run: %v", runErr)
		}
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = api.Shutdown(sctx)
	})
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { producer.Close(context.Background()) })
	r.producer = producer
	return r
}

// send produces n demo events.
func (r *rig) send(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	if got, err := produce.Demo(ctx, r.producer, produce.DemoOptions{Count: n, Keys: 20}); err != nil || got != n {
		t.Fatalf("producer: %d of %d, %v", got, n, err)
	}
}

// rows returns the rows in the table and the distinct (partition, seq).
func (r *rig) rows(t *testing.T, ctx context.Context) (rows, distinct int) {
	t.Helper()
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM orders`).Scan(&rows, &distinct)
	if err != nil && !strings.Contains(err.Error(), "does not exist") {
		t.Fatal(err)
	}
	return rows, distinct
}

func (r *rig) do(t *testing.T, method, path string) (int, []byte) {
	t.Helper()
	return r.call(t, method, path, "", "")
}

// call sends a request with body, and with token as its bearer token
// when not empty.
func (r *rig) call(t *testing.T, method, path, body, token string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, r.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, got
}

func (r *rig) status(t *testing.T) connector.ConnectorStatus {
	t.Helper()
	code, body := r.do(t, "GET", "/v1/connectors/orders-pg")
	if code != http.StatusOK {
		t.Fatalf("GET /v1/connectors/orders-pg: %d %s", code, body)
	}
	var st connector.ConnectorStatus
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("GET /v1/connectors/orders-pg: %v\n%s", err, body)
	}
	return st
}

// totalLag sums the partitions' lag; ok is false while one is unknown.
func totalLag(st connector.ConnectorStatus) (lag int64, ok bool) {
	if len(st.Partitions) != partitions {
		return 0, false
	}
	for _, p := range st.Partitions {
		if p.Lag == nil {
			return 0, false
		}
		lag += *p.Lag
	}
	return lag, true
}

// eventually polls cond every 100ms until it holds or ctx ends.
func eventually(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

// TestPauseResume: a paused connector commits nothing while events keep
// arriving and its lag rises; after resume it catches up to a lag of 0,
// and the table holds every event once; so it does after a restart.
func TestPauseResume(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startRig(t, ctx)

	const first, during, after = 200, 150, 50
	r.send(t, ctx, first)
	eventually(t, ctx, "the first events committed and a lag of 0", func() bool {
		n, _ := r.rows(t, ctx)
		lag, ok := totalLag(r.status(t))
		return n == first && ok && lag == 0
	})

	code, body := r.do(t, "POST", "/v1/connectors/orders-pg/pause")
	if code != http.StatusOK {
		t.Fatalf("pause: %d %s", code, body)
	}
	eventually(t, ctx, "every partition paused", func() bool {
		st := r.status(t)
		for _, p := range st.Partitions {
			if !p.Paused {
				return false
			}
		}
		return st.State == connector.StatePaused && len(st.Partitions) == partitions
	})
	held, _ := r.rows(t, ctx)
	committed := func(st connector.ConnectorStatus) (n int64) {
		for _, p := range st.Partitions {
			n += p.Committed
		}
		return n
	}
	before := committed(r.status(t))

	r.send(t, ctx, during)
	eventually(t, ctx, "the lag to show the events sent while paused", func() bool {
		lag, ok := totalLag(r.status(t))
		return ok && lag == during
	})
	if n, _ := r.rows(t, ctx); n != held {
		t.Errorf("the table grew from %d to %d rows while the connector was paused", held, n)
	}
	if now := committed(r.status(t)); now != before {
		t.Errorf("committed count rose from %d to %d while paused", before, now)
	}
	if code, _ := r.do(t, "POST", "/v1/connectors/orders-pg/pause"); code != http.StatusOK {
		t.Errorf("a second pause: %d, want 200 (no change)", code)
	}

	code, body = r.do(t, "POST", "/v1/connectors/orders-pg/resume")
	if code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, body)
	}
	if code, _ := r.do(t, "POST", "/v1/connectors/orders-pg/resume"); code != http.StatusConflict {
		t.Errorf("resume of a running connector: %d, want 409", code)
	}
	r.send(t, ctx, after)
	total := first + during + after
	eventually(t, ctx, "every event committed and a lag of 0", func() bool {
		n, _ := r.rows(t, ctx)
		lag, ok := totalLag(r.status(t))
		return n >= total && ok && lag == 0
	})
	rows, distinct := r.rows(t, ctx)
	if rows != total || distinct != total {
		t.Errorf("table holds %d rows, %d distinct (partition, seq); want %d of each", rows, distinct, total)
	}
	if st := r.status(t); st.State != connector.StateRunning {
		t.Errorf("state %s after resume, want running", st.State)
	}

	// Restart: the connector drains, is built again, and carries on from its
	// checkpoints and the sink's watermark.
	code, body = r.do(t, "POST", "/v1/connectors/orders-pg/restart")
	if code != http.StatusOK {
		t.Fatalf("restart: %d %s", code, body)
	}
	const later = 40
	r.send(t, ctx, later)
	eventually(t, ctx, "the events sent after the restart committed", func() bool {
		n, _ := r.rows(t, ctx)
		st := r.status(t)
		lag, ok := totalLag(st)
		return n >= total+later && ok && lag == 0 && st.State == connector.StateRunning
	})
	if rows, distinct := r.rows(t, ctx); rows != total+later || distinct != rows {
		t.Errorf("after the restart the table holds %d rows, %d distinct; want %d of each", rows, distinct, total+later)
	}

	code, body = r.do(t, "POST", "/v1/connectors/nope/pause")
	if code != http.StatusNotFound || !strings.Contains(string(body), "no such connector") {
		t.Errorf("pause of an unknown connector: %d %s, want 404 naming it", code, body)
	}
}

// TestReadyzFollowsPostgres: /readyz is 200 while the sink works, 503
// naming the connector and its sink while PostgreSQL is stopped, and 200
// again once it is back; nothing is lost or doubled across the outage.
func TestReadyzFollowsPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	r := startRig(t, ctx)
	ready := func() (int, string) {
		code, body := r.do(t, "GET", "/readyz")
		return code, string(body)
	}
	const first, during = 100, 100
	r.send(t, ctx, first)
	eventually(t, ctx, "/readyz 200 and the first events committed", func() bool {
		code, _ := ready()
		n, _ := r.rows(t, ctx)
		return code == http.StatusOK && n == first
	})

	if err := r.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	r.send(t, ctx, during) // writes now fail
	var body string
	eventually(t, ctx, "/readyz 503 while PostgreSQL is stopped", func() bool {
		var code int
		code, body = ready()
		return code == http.StatusServiceUnavailable
	})
	var rd struct {
		Ready    bool `json:"ready"`
		NotReady []struct {
			Connector, Reason string
		} `json:"not_ready"`
	}
	if err := json.Unmarshal([]byte(body), &rd); err != nil || rd.Ready || len(rd.NotReady) != 1 ||
		rd.NotReady[0].Connector != "orders-pg" || !strings.Contains(rd.NotReady[0].Reason, "sink") {
		t.Errorf("/readyz body %s (%v): want not ready, naming orders-pg and its sink", body, err)
	}

	if err := r.pg.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, ctx, "/readyz 200 after PostgreSQL is back, and every event committed", func() bool {
		code, _ := ready()
		n, _ := r.rows(t, ctx)
		return code == http.StatusOK && n >= first+during
	})
	if rows, distinct := r.rows(t, ctx); rows != first+during || distinct != rows {
		t.Errorf("table holds %d rows, %d distinct; want %d of each", rows, distinct, first+during)
	}
}

// TestRoutesDocumented: every route the server serves is in the
// "Operating ehsink" section of docs/operations.md, every route documented
// there is served, and every ehsink_ metric the server exports is described
// there.
func TestRoutesDocumented(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	readme, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "## Operating ehsink")
	if start < 0 {
		t.Fatal(`docs/operations.md has no "## Operating ehsink" section`)
	}
	section := text[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}

	documented := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		// | `GET /v1/connectors/{name}` | ... |
		if m := strings.SplitN(line, "`", 3); len(m) == 3 && strings.HasPrefix(line, "| `") {
			documented[m[1]] = true
		}
	}
	r := startRig(t, ctx)
	for _, rt := range ops.Routes(true) {
		key := rt.Method + " " + rt.Path
		if !documented[key] {
			t.Errorf("route %s is served but not in the route table of docs/operations.md", key)
		}
		delete(documented, key)
		path := strings.ReplaceAll(rt.Path, "{name}", "no-such-connector")
		code, body := r.do(t, rt.Method, path)
		switch {
		case strings.Contains(rt.Path, "{name}"):
			// The route exists: the 404 is the API's, with its JSON error.
			if code != http.StatusNotFound || !strings.Contains(string(body), "no such connector") {
				t.Errorf("%s %s: %d %s, want the API's 404", rt.Method, path, code, body)
			}
		case code == http.StatusNotFound || code == http.StatusMethodNotAllowed:
			t.Errorf("%s %s: %d, want it served", rt.Method, path, code)
		}
	}
	for key := range documented {
		if strings.HasPrefix(key, "GET /") || strings.HasPrefix(key, "POST /") {
			t.Errorf("docs/operations.md documents %s, which the server does not serve", key)
		}
	}

	r.send(t, ctx, 20)
	eventually(t, ctx, "the events committed", func() bool { n, _ := r.rows(t, ctx); return n == 20 })
	families, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		if name := f.GetName(); strings.HasPrefix(name, "ehsink_") {
			names = append(names, name)
			if !strings.Contains(section, "`"+name+"`") {
				t.Errorf("metric %s is served but not described in the Operating section of docs/operations.md", name)
			}
		}
	}
	if len(names) == 0 {
		t.Error("no ehsink_ metric served")
	}
	for _, want := range []string{"ehsink_partition_lag_events", "ehsink_partition_lag_seconds", "ehsink_partition_seconds_since_last_commit", "ehsink_connector_state"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("metric %s not served (served: %v)", want, names)
		}
	}
}

// TestPprofOnlyWhenEnabled: /debug/pprof/ is not served unless asked for.
func TestPprofOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		api, err := ops.Serve("127.0.0.1:0", ops.Options{Control: connector.NewControl(), Pprof: enabled})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get("http://" + api.Addr().String() + "/debug/pprof/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if want := map[bool]int{false: http.StatusNotFound, true: http.StatusOK}[enabled]; resp.StatusCode != want {
			t.Errorf("pprof %v: GET /debug/pprof/ = %d, want %d", enabled, resp.StatusCode, want)
		}
		if err := api.Shutdown(t.Context()); err != nil {
			t.Error(err)
		}
	}
}
