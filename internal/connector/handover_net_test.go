package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
)

// committedByPartition sums ehsink_events_committed_total per partition
// over the registries of several replicas.
func committedByPartition(t *testing.T, regs ...*prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, reg := range regs {
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() != "ehsink_events_committed_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "partition" {
						out[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	return out
}

// produceInBackground sends events demo orders to the hub of conn at rate
// per second while the test goes on; the returned func waits until they
// are sent (a failed send fails t).
func produceInBackground(t *testing.T, ctx context.Context, conn string, events int, rate float64, seed uint64) (wait func()) {
	t.Helper()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var produced sync.WaitGroup
	produced.Go(func() {
		defer producer.Close(context.Background())
		if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: events, Rate: rate, Keys: 20, Seed: seed}); err != nil || n != events {
			t.Errorf("Demo sent %d of %d: %v", n, events, err)
		}
	})
	return produced.Wait
}

// ordersSinkYAML is the sink of the "pg" connector the network-fault tests
// run: table public.orders (order_id, seq, part), which wantEveryEventOnce
// reads, on dsn; extra are more sink settings, one per line.
func ordersSinkYAML(dsn string, extra ...string) string {
	var b strings.Builder
	b.WriteString("    sink:\n      type: postgres\n      dsn: \"" + dsn + "\"\n      table: public.orders\n      create_table: true\n")
	for _, e := range extra {
		b.WriteString("      " + e + "\n")
	}
	b.WriteString(`      columns:
        order_id: {from: $.order_id, type: text}
        seq: {from: "@sequence_number", type: bigint}
        part: {from: "@partition", type: text}
`)
	return b.String()
}

// replicaLogs returns a logger for the replicas of a test, whose lines
// the test prints if it fails.
func replicaLogs(t *testing.T) *slog.Logger {
	t.Helper()
	logs := &testenv.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(logs, nil))
}

// stopRuns stops the runs and fails t for each whose Run returned an error.
func stopRuns(t *testing.T, runs map[string]chan error, stops ...context.CancelFunc) {
	t.Helper()
	for _, stop := range stops {
		stop()
	}
	for name, done := range runs {
		if err := <-done; err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}
}

// wantEveryEventOnce checks that public.orders holds each of the events
// sent exactly once.
func wantEveryEventOnce(t *testing.T, ctx context.Context, dsn string, events int) {
	t.Helper()
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	var rows, distinct int
	if err := pg.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM public.orders`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != events || distinct != events {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct events), want %d", rows, distinct, events)
	}
}

// waitForRows waits until public.orders holds at least n rows. The
// committed metrics' sum can run ahead of the table (a partition given up
// and reopened counts its commits again), so a test that stops its runs
// once everything is in waits on the rows themselves.
func waitForRows(t *testing.T, ctx context.Context, done chan error, dsn string, n int) {
	t.Helper()
	waitUntil(t, ctx, done, fmt.Sprintf("%d rows in PostgreSQL", n), func() bool {
		pg, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return false
		}
		defer pg.Close(context.WithoutCancel(ctx))
		var rows int
		return pg.QueryRow(ctx, `SELECT count(*) FROM public.orders`).Scan(&rows) == nil && rows >= n
	})
}

// watchCommits follows the commits of the replicas' registries every
// 100 ms until public.orders on dsn holds events rows, and returns the
// longest time a partition went without one (from the call on) and which.
// It fails t as soon as that passes bound while the healthy replica could
// serve it, a replica's Run returns, or ctx ends. each, if not nil, is
// called at every look.
//
// The end is the table's, not the metrics' sum: a commit whose answer the
// fault cut off is in the table but counted by no replica (the new owner
// resumes after it), so the sum can stay one short while every partition,
// with nothing left to read, goes without a commit past bound.
func watchCommits(t *testing.T, ctx context.Context, dsn string, events int, bound time.Duration, runs map[string]chan error, each func(time.Time), regs ...*prometheus.Registry) (time.Duration, string) {
	t.Helper()
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	start := time.Now()
	last := map[string]float64{}
	lastAt := map[string]time.Time{}
	var longest time.Duration
	longestPart := ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		now := time.Now()
		c := committedByPartition(t, regs...)
		for p, n := range c {
			if _, ok := lastAt[p]; !ok {
				lastAt[p] = start
			}
			if n > last[p] {
				last[p], lastAt[p] = n, now
			}
		}
		for p, at := range lastAt {
			if gap := now.Sub(at); gap > longest {
				longest, longestPart = gap, p
			}
		}
		if each != nil {
			each(now)
		}
		var rows int
		if err := pg.QueryRow(ctx, `SELECT count(*) FROM public.orders`).Scan(&rows); err != nil && ctx.Err() == nil {
			t.Fatalf("counting the rows: %v", err)
		}
		if rows >= events {
			return longest, longestPart
		}
		if longest > bound {
			t.Fatalf("partition %s went %s without a commit while another replica could serve it, want at most %s (committed %v)", longestPart, longest.Round(time.Millisecond), bound, c)
		}
		for name, done := range runs {
			select {
			case err := <-done:
				t.Fatalf("%s's Run returned %v", name, err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not every event committed: %v of %d", c, events)
		case <-tick.C:
		}
	}
}

// TestHandOverWhenOneReplicaLosesItsSink: replicas A and B share a hub,
// a checkpoint store and a PostgreSQL database; A reaches PostgreSQL
// through a fault proxy. While events flow, A's path is blackholed
// (half-open). A must notice (sink timeout), stop claiming, and give its
// partitions up after the ownership expiration, and B must take them
// over: no partition may go without a commit for longer than the sink
// timeout + the ownership expiration + two update intervals + 5s of
// slack. The longest gap is logged. Every event ends in the table once.
func TestHandOverWhenOneReplicaLosesItsSink(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const (
		events     = 3000
		expiration = 10 * time.Second
		update     = 2 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, conn := startHub(t, "orders", 2)
	dsn, proxied, proxy := proxiedDatabase(t)
	dir := t.TempDir()
	config := func(dsn string) string {
		return `
drain_timeout: 5s
connectors:
  - name: pg
    source: {connection: "` + conn + `", batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: ` + update.String() + `, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {sink_timeout: ` + faultSinkTimeout.String() + `, retry: {initial_backoff: 50ms, max_backoff: 500ms}, circuit_breaker: {failures: 3, probe_interval: 500ms, max_probe_interval: 4s}}
` + ordersSinkYAML(dsn, "idle_in_transaction_timeout: "+faultIdleInTx.String())
	}
	log := replicaLogs(t)
	cfgA, regA, metA := loadWithMetrics(t, filepath.Join(dir), config(proxied))
	ctlA := connector.NewControl()
	doneA, stopA := runInBackground(ctx, cfgA, connector.RunOptions{Metrics: metA, Control: ctlA, Logger: log.With("replica", "A")})
	defer stopA()

	produced := produceInBackground(t, ctx, conn, events, 100, 21)
	defer produced()

	waitUntil(t, ctx, doneA, "A commits on both partitions", func() bool {
		c := committedByPartition(t, regA)
		return c["0"] > 0 && c["1"] > 0
	})
	bDir := t.TempDir()
	cfgB, regB, metB := loadWithMetrics(t, bDir, config(dsn))
	doneB, stopB := runInBackground(ctx, cfgB, connector.RunOptions{Metrics: metB, Logger: log.With("replica", "B")})
	defer stopB()

	bound := faultSinkTimeout + expiration + 2*update + 5*time.Second
	start := time.Now()
	proxy.Set(faultproxy.Fault{Blackhole: true})
	var detected time.Duration
	longest, longestPart := watchCommits(t, ctx, dsn, events, bound, map[string]chan error{"A": doneA, "B": doneB}, func(now time.Time) {
		if detected == 0 && sumMetric(t, regA, "ehsink_circuit_breaker_state", "pg") != 0 {
			detected = now.Sub(start)
		}
	}, regA, regB)
	t.Logf("A's sink blackholed: A's breaker open after %s; longest partition without a commit: partition %s, %s (bound %s); B committed %v",
		detected.Round(time.Millisecond), longestPart, longest.Round(time.Millisecond), bound, committedByPartition(t, regB))
	if detected == 0 {
		t.Error("A's breaker never opened")
	}
	if owned := sumMetric(t, regA, "ehsink_partitions_owned", "pg"); owned != 0 {
		t.Errorf("A owns %v partitions with its sink unreachable", owned)
	}
	proxy.Heal()
	waitForRows(t, ctx, doneB, dsn, events)
	stopRuns(t, map[string]chan error{"A": doneA, "B": doneB}, stopA, stopB)
	wantEveryEventOnce(t, ctx, dsn, events)
}
