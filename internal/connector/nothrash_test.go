package connector_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/produce"
)

// notStartedCounter counts, per replica, the claims a replica gave up at
// once because the sink did not answer ("partition not started").
type notStartedCounter struct {
	mu sync.Mutex
	n  map[string]int
	on bool
}

type notStartedHandler struct {
	c       *notStartedCounter
	replica string
}

func (h notStartedHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h notStartedHandler) Handle(_ context.Context, r slog.Record) error {

	if r.Message == "partition not started: its resume position is unknown; lease given up until the next claim" {
		h.c.mu.Lock()
		if h.c.on {
			h.c.n[h.replica]++
		}
		h.c.mu.Unlock()
	}
	return nil
}
func (h notStartedHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h notStartedHandler) WithGroup(string) slog.Handler      { return h }

// TestNoThrashWhenNoReplicaReachesTheSink: two replicas whose PostgreSQL
// path is blackholed. Each opens its breaker; since neither sees the
// other commit, neither gives its partitions up (see
// TestPartitionsStayPutWhenNoReplicaReachesTheSink), and should one be
// freed, neither may claim it only to give it up at every load-balancing
// round (1s here): a replica with an open breaker claims nothing within
// its open period, and each failed claim doubles it. Over 30s each
// replica may make at most 8 such claims (one per round would be about
// 30). After the heal every partition commits again.
func TestNoThrashWhenNoReplicaReachesTheSink(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const expiration = 6 * time.Second
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	_, conn := startHub(t, "orders", 2)
	_, proxied, proxy := proxiedDatabase(t)
	dir := t.TempDir()
	yaml := `
drain_timeout: 5s
connectors:
  - name: pg
    source: {connection: "` + conn + `", batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {sink_timeout: 2s, retry: {initial_backoff: 50ms, max_backoff: 500ms}, circuit_breaker: {failures: 3, probe_interval: 500ms, max_probe_interval: 16s}}
    sink:
      type: postgres
      dsn: "` + proxied + `"
      table: public.orders
      create_table: true
      columns:
        order_id: {from: $.order_id, type: text}
        seq: {from: "@sequence_number", type: bigint}
`
	counter := &notStartedCounter{n: map[string]int{}}
	type replica struct {
		reg  *prometheus.Registry
		done chan error
		stop context.CancelFunc
	}
	replicas := map[string]*replica{}
	for _, name := range []string{"A", "B"} {
		cfg, reg, met := loadWithMetrics(t, t.TempDir(), yaml)
		done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(notStartedHandler{c: counter, replica: name})})
		defer stop()
		replicas[name] = &replica{reg: reg, done: done, stop: stop}
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	pctx, stopProducing := context.WithCancel(ctx)
	var produced sync.WaitGroup
	produced.Go(func() { _, _ = produce.Demo(pctx, producer, produce.DemoOptions{Rate: 50, Keys: 20, Seed: 41}) })
	defer produced.Wait()
	defer stopProducing()
	owned := func() float64 {
		return sumMetric(t, replicas["A"].reg, "ehsink_partitions_owned", "pg") + sumMetric(t, replicas["B"].reg, "ehsink_partitions_owned", "pg")
	}
	waitUntil(t, ctx, replicas["A"].done, "both partitions owned", func() bool { return owned() == 2 })

	start := time.Now()
	proxy.Set(faultproxy.Fault{Blackhole: true})
	waitUntil(t, ctx, replicas["A"].done, "both breakers open", func() bool {
		return sumMetric(t, replicas["A"].reg, "ehsink_circuit_breaker_state", "pg") != 0 &&
			sumMetric(t, replicas["B"].reg, "ehsink_circuit_breaker_state", "pg") != 0
	})
	opened := time.Since(start)
	// the partitions are given up within the ownership expiration; count
	// from then
	settle, cancelSettle := context.WithTimeout(ctx, expiration)
	<-settle.Done()
	cancelSettle()
	counter.mu.Lock()
	counter.on = true
	counter.mu.Unlock()
	window, cancelWindow := context.WithTimeout(ctx, 30*time.Second)
	defer cancelWindow()
	select {
	case <-window.Done():
	case err := <-replicas["A"].done:
		t.Fatalf("A's Run returned %v", err)
	case err := <-replicas["B"].done:
		t.Fatalf("B's Run returned %v", err)
	}
	counter.mu.Lock()
	counter.on = false
	counts := map[string]int{"A": counter.n["A"], "B": counter.n["B"]}
	counter.mu.Unlock()
	t.Logf("both breakers open %s after the blackhole; claims given up at once over 30s from one ownership expiration later: %v; partitions owned at the end: %v", opened.Round(time.Millisecond), counts, owned())
	for name, n := range counts {
		if n > 8 {
			t.Errorf("replica %s claimed and gave up a partition %d times in 30s with its sink down, want at most 8", name, n)
		}
	}
	proxy.Heal()
	before := committedByPartition(t, replicas["A"].reg, replicas["B"].reg)
	waitUntil(t, ctx, replicas["A"].done, "every partition commits again after the heal", func() bool {
		c := committedByPartition(t, replicas["A"].reg, replicas["B"].reg)
		return owned() == 2 && c["0"] > before["0"] && c["1"] > before["1"]
	})
	for name, r := range replicas {
		r.stop()
		if err := <-r.done; err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}
}
