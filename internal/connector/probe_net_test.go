package connector_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
)

// TestIdleReplicaRejoinsWhenItsSinkAnswers: A's path to PostgreSQL is cut
// while B serves, so A gives every partition up and holds its claims for
// the breaker's open period, here 10 minutes. Then A's path heals and B
// stops. A holds no partition, so neither a sink call nor a claim probes
// its sink: only the idle probe (probeIdle) can close its breaker. A must
// take both partitions over and commit every event once, long before the
// open period ends.
func TestIdleReplicaRejoinsWhenItsSinkAnswers(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const (
		events     = 1500
		expiration = 6 * time.Second
		update     = time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
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
    errors: {sink_timeout: ` + faultSinkTimeout.String() + `, retry: {initial_backoff: 50ms, max_backoff: 500ms}, circuit_breaker: {failures: 3, probe_interval: 10m, max_probe_interval: 10m}}
` + ordersSinkYAML(dsn)
	}
	log := replicaLogs(t)
	produced := produceInBackground(t, ctx, conn, events, 50, 5)
	defer produced()

	cfgA, regA, metA := loadWithMetrics(t, dir, config(proxied))
	doneA, stopA := runInBackground(ctx, cfgA, connector.RunOptions{Metrics: metA, Logger: log.With("replica", "A")})
	defer stopA()
	waitUntil(t, ctx, doneA, "A commits on both partitions", func() bool {
		c := committedByPartition(t, regA)
		return c["0"] > 0 && c["1"] > 0
	})
	cfgB, regB, metB := loadWithMetrics(t, t.TempDir(), config(dsn))
	doneB, stopB := runInBackground(ctx, cfgB, connector.RunOptions{Metrics: metB, Logger: log.With("replica", "B")})
	defer stopB()

	proxy.Set(faultproxy.Fault{Blackhole: true})
	waitUntil(t, ctx, doneA, "A's breaker open and every partition with B", func() bool {
		return sumMetric(t, regA, "ehsink_circuit_breaker_state", "pg") != 0 &&
			sumMetric(t, regA, "ehsink_partitions_owned", "pg") == 0 && sumMetric(t, regB, "ehsink_partitions_owned", "pg") == 2
	})
	proxy.Heal()
	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("B: Run: %v", err)
	}
	waitUntil(t, ctx, doneA, "A serving both partitions again", func() bool {
		return sumMetric(t, regA, "ehsink_partitions_owned", "pg") == 2
	})
	produced()
	waitForRows(t, ctx, doneA, dsn, events)
	stopRuns(t, map[string]chan error{"A": doneA}, stopA)
	wantEveryEventOnce(t, ctx, dsn, events)
}
