package connector_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestEventHubsBlackhole: the connector reads the emulator over TCP
// through the fault proxy, and the path is blackholed (half-open) while
// events wait. Receives over a dead AMQP connection just come back empty
// (the SDK notices only at the AMQP idle timeout, 60s); readiness must
// fail within two lag intervals, through the bounded partition-properties
// calls. After the heal every event is in the table once.
func TestEventHubsBlackhole(t *testing.T) {
	const (
		events      = 1000
		lagInterval = 2 * time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	addr, conn := startHub(t, "orders", 2)
	proxy := testenv.Proxy(t, addr)
	dsn := testenv.Postgres(t).NewDatabase(t)
	dir := t.TempDir()
	yaml := `
drain_timeout: 5s
http: {lag_interval: ` + lagInterval.String() + `}
connectors:
  - name: pg
    source: {connection: "` + strings.Replace(conn, addr, proxy.Addr(), 1) + `", batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 2s, ownership_expiration: 20s}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
` + ordersSinkYAML(dsn)
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	log := replicaLogs(t)
	ctl := connector.NewControl()
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Control: ctl, Logger: log})
	defer stop()
	notReady := func() string {
		st, err := ctl.Status("pg")
		if err != nil {
			t.Fatal(err)
		}
		return st.NotReady()
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	send := func(n int, seed uint64) {
		t.Helper()
		if got, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: n, Keys: 20, Seed: seed}); err != nil || got != n {
			t.Fatalf("Demo sent %d of %d: %v", got, n, err)
		}
	}
	send(events/2, 31)
	committed := func() float64 { return sumMetric(t, reg, "ehsink_events_committed_total", "pg") }
	waitUntil(t, ctx, done, "the first half committed, and ready", func() bool { return committed() >= events/2 && notReady() == "" })

	start := time.Now()
	proxy.Set(faultproxy.Fault{Blackhole: true})
	send(events/2, 32) // straight to the emulator: they wait behind the blackhole
	bound, cancelBound := context.WithTimeout(ctx, 2*lagInterval+5*time.Second)
	defer cancelBound()
	waitUntil(t, bound, done, "readiness fails within two lag intervals", func() bool {
		return strings.Contains(notReady(), "source not reached")
	})
	t.Logf("event hubs blackholed: not ready after %s (%q)", time.Since(start).Round(time.Millisecond), notReady())

	proxy.Heal()
	healed := time.Now()
	waitUntil(t, ctx, done, "every event committed after the heal, and ready", func() bool { return committed() >= events && notReady() == "" })
	waitForRows(t, ctx, done, dsn, events)
	t.Logf("every event committed %s after the heal", time.Since(healed).Round(time.Millisecond))
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantEveryEventOnce(t, ctx, dsn, events)
}
