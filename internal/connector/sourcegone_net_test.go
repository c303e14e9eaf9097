package connector_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestHandOverWhenOneReplicaLosesEventHubs: A reaches Event Hubs through a
// fault proxy (source.custom_endpoint), B directly; both share the
// checkpoint store and the table. A's path is blackholed: its receives
// come back empty and its leases are renewed through the store, so only
// its failed partition-properties calls tell it that it cannot read. It
// must give its partitions up once the ownership expiration has passed
// since the first failed call, B seen committing, and B must take them
// over: no partition may go without a commit for longer than two lag
// intervals (the first failed call) + the ownership expiration + two
// update intervals + 5 s. Every event ends in the table once.
func TestHandOverWhenOneReplicaLosesEventHubs(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const (
		events     = 2500
		expiration = 6 * time.Second
		update     = time.Second
		lag        = time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, conn := startHub(t, "orders", 2)
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := testenv.Proxy(t, props.FullyQualifiedNamespace)
	dsn, _, _ := proxiedDatabase(t)
	dir := t.TempDir()
	config := func(endpoint string) string {
		return `
drain_timeout: 5s
http: {lag_interval: ` + lag.String() + `}
connectors:
  - name: pg
    source: {connection: "` + conn + `", custom_endpoint: "` + endpoint + `", batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: ` + update.String() + `, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {retry: {initial_backoff: 50ms, max_backoff: 500ms}}
` + ordersSinkYAML(dsn)
	}
	log := replicaLogs(t)
	produced := produceInBackground(t, ctx, conn, events, 80, 9)
	defer produced()

	cfgA, regA, metA := loadWithMetrics(t, dir, config(proxy.Addr()))
	doneA, stopA := runInBackground(ctx, cfgA, connector.RunOptions{Metrics: metA, Logger: log.With("replica", "A")})
	defer stopA()
	waitUntil(t, ctx, doneA, "A commits on both partitions", func() bool {
		c := committedByPartition(t, regA)
		return c["0"] > 0 && c["1"] > 0
	})
	cfgB, regB, metB := loadWithMetrics(t, t.TempDir(), config(props.FullyQualifiedNamespace))
	doneB, stopB := runInBackground(ctx, cfgB, connector.RunOptions{Metrics: metB, Logger: log.With("replica", "B")})
	defer stopB()

	bound := 2*lag + expiration + 2*update + 5*time.Second
	proxy.Set(faultproxy.Fault{Blackhole: true})
	longest, longestPart := watchCommits(t, ctx, dsn, events, bound, map[string]chan error{"A": doneA, "B": doneB}, nil, regA, regB)
	t.Logf("A's Event Hubs blackholed: longest partition without a commit: partition %s, %s (bound %s); B committed %v",
		longestPart, longest.Round(time.Millisecond), bound, committedByPartition(t, regB))
	if owned := sumMetric(t, regA, "ehsink_partitions_owned", "pg"); owned != 0 {
		t.Errorf("A owns %v partitions while it cannot reach Event Hubs", owned)
	}
	proxy.Heal()
	waitForRows(t, ctx, doneB, dsn, events)
	stopRuns(t, map[string]chan error{"A": doneA, "B": doneB}, stopA, stopB)
	wantEveryEventOnce(t, ctx, dsn, events)
}
