package connector_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestBlobBlackholeStopsCommitsBeforeLeasesExpire: a replica whose Blob
// checkpoint store is blackholed (half-open) cannot renew its leases. It
// must commit nothing to its sink after a lease it held ran out: past that
// instant another replica may own the partition. Each row carries the
// time it was written; the last one of each partition must come before
// the expiry of the partition's last renewed lease, as the store recorded
// it (Last-Modified, read from Azurite directly). Without the runner's
// lease check the replica commits until its processor fails, after the
// retries of several renewal attempts, well past the expiry. After the
// heal every event is in the table once.
func TestBlobBlackholeStopsCommitsBeforeLeasesExpire(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const (
		events     = 2000
		expiration = 5 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	az := testenv.NewAzurite(t)
	proxy := testenv.Proxy(t, "127.0.0.1:"+strconv.Itoa(az.Port()))
	containerName := az.ContainerName(t)
	viaProxy := strings.Replace(az.ConnectionString(), "127.0.0.1:"+strconv.Itoa(az.Port()), proxy.Addr(), 1)

	dsn := testenv.Postgres(t).NewDatabase(t)
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	if _, err := pg.Exec(ctx, `CREATE TABLE public.orders (order_id text, seq bigint, part text, at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	yaml := `
drain_timeout: 5s
emulator:
  hubs: {orders: 2}
  demo: {eventhub: orders, count: ` + strconv.Itoa(events) + `, rate: 100, keys: 20}
connectors:
  - name: pg
    source: {connection: emulator, eventhub: orders, batch: {max_events: 20, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 2s, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {blob: {connection: "` + viaProxy + `", container: ` + containerName + `}}
    errors: {sink_timeout: 2s, retry: {initial_backoff: 50ms, max_backoff: 500ms}}
    sink:
      type: postgres
      dsn: "` + dsn + `"
      table: public.orders
      columns:
        order_id: {from: $.order_id, type: text}
        seq: {from: "@sequence_number", type: bigint}
        part: {from: "@partition", type: text}
`
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	logs := &testenv.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("connector logs:\n%s", logs.String())
		}
	})
	ctl := connector.NewControl()
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, DevEnv: devenv.New(), Control: ctl,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer stop()
	committed := func() float64 { return sumMetric(t, reg, "ehsink_events_committed_total", "pg") }
	waitUntil(t, ctx, done, "the first commits", func() bool {
		c := committedByPartition(t, reg)
		return c["0"] > 0 && c["1"] > 0
	})

	start := time.Now()
	proxy.Set(faultproxy.Fault{Blackhole: true})
	notReady := func() string {
		st, err := ctl.Status("pg")
		if err != nil {
			t.Fatal(err)
		}
		return st.NotReady()
	}
	var unready time.Duration
	waitUntil(t, ctx, done, "the replica stops owning partitions, and readiness fails", func() bool {
		if unready == 0 && strings.Contains(notReady(), "checkpoint store not reached") {
			unready = time.Since(start)
		}
		return unready != 0 && sumMetric(t, reg, "ehsink_partitions_owned", "pg") == 0
	})
	stopped := time.Since(start)

	// The leases as the store holds them, read around the proxy.
	cc, err := container.NewClientFromConnectionString(az.ConnectionString(), containerName, nil)
	if err != nil {
		t.Fatal(err)
	}
	expiry := map[string]time.Time{}
	pager := cc.NewListBlobsFlatPager(nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range page.Segment.BlobItems {
			name := *b.Name
			if i := strings.Index(name, "/ownership/"); i >= 0 {
				expiry[name[i+len("/ownership/"):]] = b.Properties.LastModified.Add(time.Second + expiration) // Last-Modified is whole seconds
			}
		}
	}
	if len(expiry) != 2 {
		t.Fatalf("ownership blobs for partitions %v, want 0 and 1", expiry)
	}
	for part, exp := range expiry {
		var last time.Time
		if err := pg.QueryRow(ctx, `SELECT max(at) FROM public.orders WHERE part = $1`, part).Scan(&last); err != nil {
			t.Fatal(err)
		}
		t.Logf("partition %s: last row written %s before the lease expiry (store time, rounded up)", part, exp.Sub(last).Round(time.Millisecond))
		if !last.Before(exp) {
			t.Errorf("partition %s: a row was written at %s, after its lease expired (by %s)", part, last.Format(time.RFC3339Nano), exp.Format(time.RFC3339Nano))
		}
	}
	t.Logf("blob blackholed: not ready after %s (%q); the replica owned no partition after %s", unready.Round(time.Millisecond), notReady(), stopped.Round(time.Millisecond))

	proxy.Heal()
	waitUntil(t, ctx, done, "every event committed after the heal, and readiness back", func() bool { return committed() >= events && notReady() == "" })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	var rows, distinct int
	if err := pg.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM public.orders`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != events || distinct != events {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct events), want %d", rows, distinct, events)
	}
}
