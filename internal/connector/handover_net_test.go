package connector_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/produce"
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

// TestHandOverWhenOneReplicaLosesItsSink: replicas A and B share a hub,
// a checkpoint store and a PostgreSQL database; A reaches PostgreSQL
// through a fault proxy. While events flow, A's path is blackholed
// (half-open). A must notice (sink timeout), stop claiming, and give its
// partitions up after the ownership expiration, and B must take them
// over: no partition may go without a commit for longer than the sink
// timeout + the ownership expiration + two update intervals + 5s of
// slack. The longest gap is logged. Every event ends in the table once.
func TestHandOverWhenOneReplicaLosesItsSink(t *testing.T) {
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
    sink:
      type: postgres
      dsn: "` + dsn + `"
      table: public.orders
      create_table: true
      idle_in_transaction_timeout: ` + faultIdleInTx.String() + `
      columns:
        order_id: {from: $.order_id, type: text}
        seq: {from: "@sequence_number", type: bigint}
        part: {from: "@partition", type: text}
`
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of both replicas:\n%s", logs.String())
		}
	})
	cfgA, regA, metA := loadWithMetrics(t, filepath.Join(dir), config(proxied))
	ctlA := connector.NewControl()
	doneA, stopA := runInBackground(ctx, cfgA, connector.RunOptions{Metrics: metA, Control: ctlA, Logger: log.With("replica", "A")})
	defer stopA()

	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	var produced sync.WaitGroup
	produced.Go(func() {
		if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: events, Rate: 100, Keys: 20, Seed: 21}); err != nil || n != events {
			t.Errorf("Demo sent %d of %d: %v", n, events, err)
		}
	})
	defer produced.Wait()

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
	last := map[string]float64{}
	lastAt := map[string]time.Time{"0": start, "1": start}
	var longest time.Duration
	longestPart := ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var detected time.Duration
	for {
		now := time.Now()
		c := committedByPartition(t, regA, regB)
		for _, p := range []string{"0", "1"} {
			if c[p] > last[p] {
				last[p], lastAt[p] = c[p], now
			}
			if gap := now.Sub(lastAt[p]); gap > longest {
				longest, longestPart = gap, p
			}
		}
		if detected == 0 && sumMetric(t, regA, "ehsink_circuit_breaker_state", "pg") != 0 {
			detected = now.Sub(start)
		}
		if c["0"]+c["1"] >= events {
			break
		}
		if longest > bound {
			t.Fatalf("partition %s went %s without a commit while B could serve it, want at most %s (committed %v)", longestPart, longest.Round(time.Millisecond), bound, c)
		}
		select {
		case err := <-doneA:
			t.Fatalf("A's Run returned %v", err)
		case err := <-doneB:
			t.Fatalf("B's Run returned %v", err)
		case <-ctx.Done():
			t.Fatalf("not every event committed: %v of %d", c, events)
		case <-tick.C:
		}
	}
	t.Logf("A's sink blackholed: A's breaker open after %s; longest partition without a commit: partition %s, %s (bound %s); B committed %v",
		detected.Round(time.Millisecond), longestPart, longest.Round(time.Millisecond), bound, committedByPartition(t, regB))
	if detected == 0 {
		t.Error("A's breaker never opened")
	}
	if longest > bound {
		t.Errorf("partition %s went %s without a commit while B could serve it, want at most %s", longestPart, longest.Round(time.Millisecond), bound)
	}
	if owned := sumMetric(t, regA, "ehsink_partitions_owned", "pg"); owned != 0 {
		t.Errorf("A owns %v partitions with its sink unreachable", owned)
	}
	proxy.Heal()
	stopA()
	stopB()
	for name, done := range map[string]chan error{"A": doneA, "B": doneB} {
		if err := <-done; err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}
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
