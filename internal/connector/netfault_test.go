package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/testenv"
)

// Bounds of the network-fault tests, from the connector settings they use.
const (
	faultSinkTimeout = 2 * time.Second  // errors.sink_timeout
	faultIdleInTx    = 2 * time.Second  // sink.idle_in_transaction_timeout
	faultExpiration  = 20 * time.Second // load_balancing.ownership_expiration
)

// proxiedDatabase makes a fresh database and a fault proxy in front of its
// server; it returns the database's DSN, the same DSN through the proxy,
// and the proxy.
func proxiedDatabase(t *testing.T) (dsn, proxied string, proxy *faultproxy.Proxy) {
	t.Helper()
	dsn = testenv.Postgres(t).NewDatabase(t)
	proxied, proxy = testenv.ProxyDSN(t, dsn)
	return dsn, proxied, proxy
}

// pgFaultRun is one connector writing to PostgreSQL through a fault proxy.
type pgFaultRun struct {
	dsn   string // direct, for the test's own sessions
	proxy *faultproxy.Proxy
	reg   *prometheus.Registry
	ctl   *connector.Control
	done  chan error
	stop  context.CancelFunc
	logs  *testenv.LogBuffer
}

// startPGFault starts, with errors.sink_timeout sinkTimeout, one append connector reading a demo of events
// events at rate per second from the in-process emulator into a fresh
// database reached through a fault proxy.
func startPGFault(t *testing.T, ctx context.Context, events, rate int, sinkTimeout time.Duration) *pgFaultRun {
	t.Helper()
	dsn, proxied, proxy := proxiedDatabase(t)
	dir := t.TempDir()
	yaml := `
drain_timeout: 5s
emulator:
  hubs: {orders: 2}
  demo: {eventhub: orders, count: ` + strconv.Itoa(events) + `, rate: ` + strconv.Itoa(rate) + `, keys: 20}
connectors:
  - name: pg
    source: {connection: emulator, eventhub: orders, batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 2s, ownership_expiration: ` + faultExpiration.String() + `}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {sink_timeout: ` + sinkTimeout.String() + `, retry: {initial_backoff: 50ms, max_backoff: 500ms}, circuit_breaker: {failures: 3, probe_interval: 500ms, max_probe_interval: 2s}}
` + ordersSinkYAML(proxied, "idle_in_transaction_timeout: "+faultIdleInTx.String(), "statement_timeout: "+faultSinkTimeout.String())
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	logs := &testenv.LogBuffer{}
	ctl := connector.NewControl()
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Control: ctl, DevEnv: devenv.New(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	r := &pgFaultRun{dsn: dsn, proxy: proxy, reg: reg, ctl: ctl, done: done, stop: stop, logs: logs}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("connector logs:\n%s", logs.String())
		}
	})
	return r
}

func (r *pgFaultRun) committed(t *testing.T) float64 {
	return sumMetric(t, r.reg, "ehsink_events_committed_total", "pg")
}

// stored counts the distinct events in the table.
func (r *pgFaultRun) stored(t *testing.T, ctx context.Context) int {
	pg, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	var n int
	if err := pg.QueryRow(ctx, `SELECT count(DISTINCT (part, seq)) FROM public.orders`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (r *pgFaultRun) breakerOpen(t *testing.T) bool {
	return sumMetric(t, r.reg, "ehsink_circuit_breaker_state", "pg") != 0
}

func (r *pgFaultRun) notReady(t *testing.T) string {
	st, err := r.ctl.Status("pg")
	if err != nil {
		t.Fatal(err)
	}
	return st.NotReady()
}

// detect applies f and waits until the breaker opened and readiness went
// red; it returns how long that took.
func (r *pgFaultRun) detect(t *testing.T, ctx context.Context, f faultproxy.Fault) time.Duration {
	t.Helper()
	start := time.Now()
	r.proxy.Set(f)
	bound, cancel := context.WithTimeout(ctx, faultExpiration)
	defer cancel()
	waitUntil(t, bound, r.done, fmt.Sprintf("the breaker opens and readiness fails within ownership_expiration %s", faultExpiration), func() bool {
		return r.breakerOpen(t) && r.notReady(t) != ""
	})
	return time.Since(start)
}

// healAndFinish heals the proxy, waits for every event to be committed
// and the breaker to close, stops the connector and checks the table
// holds each event exactly once.
func (r *pgFaultRun) healAndFinish(t *testing.T, ctx context.Context, events int) {
	t.Helper()
	r.proxy.Heal()
	// The table, not the committed-events metric: a flush whose COMMIT
	// landed but whose answer was cut reads the watermark it moved as
	// another writer's, and its events are not counted as committed.
	waitUntil(t, ctx, r.done, "every event committed after the heal", func() bool {
		return r.stored(t, ctx) >= events && !r.breakerOpen(t)
	})
	if reason := r.notReady(t); reason != "" {
		t.Errorf("not ready after the heal: %s", reason)
	}
	r.stop()
	if err := <-r.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantEveryEventOnce(t, ctx, r.dsn, events)
}

// TestPostgresNetworkFaults runs a connector against PostgreSQL through a
// fault proxy and cuts the path while events flow. Each fault must be
// detected (the breaker open, readiness failing) within the ownership
// expiration, so that the partitions can go to a replica whose sink
// answers; the measured time is logged. After the heal every event is in
// the table once.
//
//   - blackhole: the connections stay half-open. Only the sink timeout
//     notices: without it the flush waits forever and the breaker never
//     opens; without it counting as a failure the breaker stays closed.
//   - reset: the connections are reset.
//   - latency (+300ms each way) and a bandwidth limit (64 KiB/s): a slow
//     path is not a dead one. Events keep being committed, and the
//     breaker must not open, with the 2s sink timeout that notices the
//     blackhole: a flush takes longer than that in all, but its
//     connection keeps answering.
//   - blackhole mid-transaction: the path dies once the server has run a
//     flush's BEGIN and fence and waits in the transaction: the server
//     keeps an open transaction holding the watermark row's lock. The server's idle-in-transaction timeout must
//     end it: a second session takes that lock within the ownership
//     expiration (without the setting, it waits for hours).
func TestPostgresNetworkFaults(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const events, rate = 1500, 150
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"blackhole", faultproxy.Fault{Blackhole: true}},
		{"reset", faultproxy.Fault{Reset: true}},
		{"latency", faultproxy.Fault{Latency: 300 * time.Millisecond}},
		{"bandwidth", faultproxy.Fault{Bandwidth: 64 << 10}},
		// ReadyForQuery with status T: the server has run the flush's
		// BEGIN and fence (the watermark row is locked) and waits in the
		// transaction. (A blackhole in the middle of the COPY data would
		// leave the server reading it, which neither timeout interrupts:
		// only the server's TCP notices such a client.)
		{"blackhole mid-transaction", faultproxy.Fault{BlackholeOnReply: []byte("Z\x00\x00\x00\x05T")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			// The same sink timeout for the slow paths: a flush of several
			// round trips (BEGIN with the fence, the COPY's describe and
			// data, COMMIT) takes longer than it at 300ms each way, but
			// the server answers each, and sink_timeout bounds the
			// silence between answers.
			r := startPGFault(t, ctx, events, rate, faultSinkTimeout)
			waitUntil(t, ctx, r.done, "the first commits", func() bool { return r.committed(t) >= 100 })
			if tc.fault.Latency > 0 || tc.fault.Bandwidth > 0 {
				before := r.committed(t)
				start := time.Now()
				r.proxy.Set(tc.fault)
				opened := false
				waitUntil(t, ctx, r.done, "300 more events committed over the slow path", func() bool {
					opened = opened || r.breakerOpen(t)
					return r.committed(t) >= before+300
				})
				if opened {
					t.Errorf("the breaker opened on a slow path (%+v)", tc.fault)
				}
				t.Logf("%s: 300 events committed in %s, breaker closed", tc.name, time.Since(start).Round(time.Millisecond))
				r.healAndFinish(t, ctx, events)
				return
			}
			if len(tc.fault.BlackholeOnReply) == 0 {
				d := r.detect(t, ctx, tc.fault)
				t.Logf("%s detected (breaker open, not ready: %q) after %s", tc.name, r.notReady(t), d.Round(time.Millisecond))
				r.healAndFinish(t, ctx, events)
				return
			}
			start := time.Now()
			r.proxy.Set(tc.fault)
			select {
			case <-r.proxy.Triggered():
			case <-ctx.Done():
				t.Fatal("no flush opened its transaction")
			}
			triggered := time.Since(start)
			// The orphaned transaction holds the watermark row until the
			// server's idle-in-transaction timeout ends its session. (A
			// second session locking the rows would also wait for any
			// other session the blackhole caught in the middle of a
			// COPY, which only the next owner's orphan check ends: so
			// the server's own view of the sink's sessions is read.)
			conn, err := pgx.Connect(ctx, r.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.WithoutCancel(ctx))
			lockStart := time.Now()
			idleInTx := func() int {
				var n int
				if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND application_name = 'ehsink' AND state LIKE 'idle in transaction%'`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			for n := idleInTx(); n > 0; n = idleInTx() {
				if time.Since(lockStart) > faultExpiration {
					t.Fatalf("%d sink sessions still idle in their transaction (the watermark row's lock held) %s after the blackhole: past ownership_expiration", n, faultExpiration)
				}
				time.Sleep(100 * time.Millisecond)
			}
			lockWait := time.Since(lockStart)
			bound, cancelBound := context.WithTimeout(ctx, faultExpiration)
			defer cancelBound()
			waitUntil(t, bound, r.done, "the breaker opens and readiness fails", func() bool {
				return r.breakerOpen(t) && r.notReady(t) != ""
			})
			t.Logf("%s: blackholed %s after the fault was armed; lock free after %s more; detected (not ready: %q) %s after the blackhole",
				tc.name, triggered.Round(time.Millisecond), lockWait.Round(time.Millisecond), r.notReady(t), (time.Since(start) - triggered).Round(time.Millisecond))
			r.healAndFinish(t, ctx, events)
		})
	}
}
