package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/testenv"
)

// The log lines stayPutCounter counts, per replica.
const (
	msgGivenUp    = "partition given up; its lease is free for a replica that can serve it"
	msgNotStarted = "partition not started: its resume position is unknown; lease given up until the next claim"
	msgClaimed    = "partition claimed"
	msgStay       = "sink unreachable for every replica: partitions stay"
	msgGiveUpAll  = "sink unreachable here while peers commit: giving partitions up"
)

// stayPutCounter counts, per replica and message, the log lines of
// interest while on, and passes every line to a text log kept for a
// failure's report.
type stayPutCounter struct {
	mu   sync.Mutex
	n    map[string]map[string]int
	on   bool
	text *testenv.LogBuffer
}

func (c *stayPutCounter) counts() map[string]map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]map[string]int{}
	for r, m := range c.n {
		out[r] = maps.Clone(m)
	}
	return out
}

func (c *stayPutCounter) count(on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = on
}

type stayPutHandler struct {
	c       *stayPutCounter
	replica string
	next    slog.Handler
}

func (h stayPutHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h stayPutHandler) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case msgGivenUp, msgNotStarted, msgClaimed, msgStay, msgGiveUpAll:
		h.c.mu.Lock()
		if h.c.on {
			if h.c.n[h.replica] == nil {
				h.c.n[h.replica] = map[string]int{}
			}
			h.c.n[h.replica][r.Message]++
		}
		h.c.mu.Unlock()
	}
	return h.next.Handle(ctx, r)
}
func (h stayPutHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return stayPutHandler{c: h.c, replica: h.replica, next: h.next.WithAttrs(a)}
}
func (h stayPutHandler) WithGroup(g string) slog.Handler {
	return stayPutHandler{c: h.c, replica: h.replica, next: h.next.WithGroup(g)}
}

// TestPartitionsStayPutWhenNoReplicaReachesTheSink: replicas A and B share
// a hub, a Blob checkpoint store (Azurite) and a PostgreSQL database,
// which both reach through the same fault proxy. Once each owns a
// partition, the proxy blackholes PostgreSQL for three ownership
// expirations while events keep coming. Neither replica may give a
// partition up or claim one: no "partition given up" or "partition
// claimed" line, each says "partitions stay", and every lease in the
// store keeps its owner and stays renewed. After the heal every event is
// in the table once.
func TestPartitionsStayPutWhenNoReplicaReachesTheSink(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	const (
		events     = 3000
		expiration = 4 * time.Second
		update     = time.Second
	)
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	_, conn := startHub(t, "orders", 2)
	dsn, proxied, proxy := proxiedDatabase(t)
	az := testenv.NewAzurite(t)
	containerName := az.ContainerName(t)
	yaml := `
drain_timeout: 5s
connectors:
  - name: pg
    source: {connection: "` + conn + `", batch: {max_events: 50, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: ` + update.String() + `, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {blob: {connection: "` + az.ConnectionString() + `", container: ` + containerName + `}}
    errors: {sink_timeout: 2s, retry: {initial_backoff: 50ms, max_backoff: 500ms}, circuit_breaker: {failures: 3, probe_interval: 500ms, max_probe_interval: 4s}}
` + ordersSinkYAML(proxied, "idle_in_transaction_timeout: "+faultIdleInTx.String())
	counter := &stayPutCounter{n: map[string]map[string]int{}, text: &testenv.LogBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of both replicas:\n%s", counter.text.String())
		}
	})
	type replica struct {
		reg  *prometheus.Registry
		done chan error
		stop context.CancelFunc
	}
	replicas := map[string]*replica{}
	for _, name := range []string{"A", "B"} {
		cfg, reg, met := loadWithMetrics(t, t.TempDir(), yaml)
		log := slog.New(stayPutHandler{c: counter, replica: name, next: slog.NewTextHandler(counter.text, nil)}).With("replica", name)
		done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: log})
		defer stop()
		replicas[name] = &replica{reg: reg, done: done, stop: stop}
	}
	owned := func(name string) float64 { return sumMetric(t, replicas[name].reg, "ehsink_partitions_owned", "pg") }

	produced := produceInBackground(t, ctx, conn, events, 100, 43)
	defer produced()

	waitUntil(t, ctx, replicas["A"].done, "each replica owns and commits one partition", func() bool {
		c := committedByPartition(t, replicas["A"].reg, replicas["B"].reg)
		return owned("A") == 1 && owned("B") == 1 && c["0"] > 0 && c["1"] > 0
	})
	leases := readLeases(t, ctx, az.ConnectionString(), containerName, conn, expiration)
	if len(leases) != 2 || leases["0"] == leases["1"] {
		t.Fatalf("leases before the outage: %v; want one partition per replica", leases)
	}

	proxy.Set(faultproxy.Fault{Blackhole: true})
	counter.count(true)
	waitUntil(t, ctx, replicas["A"].done, "both breakers open", func() bool {
		return sumMetric(t, replicas["A"].reg, "ehsink_circuit_breaker_state", "pg") != 0 &&
			sumMetric(t, replicas["B"].reg, "ehsink_circuit_breaker_state", "pg") != 0
	})
	outage, cancelOutage := context.WithTimeout(ctx, 3*expiration)
	select {
	case <-outage.Done():
	case err := <-replicas["A"].done:
		t.Fatalf("A's Run returned %v", err)
	case err := <-replicas["B"].done:
		t.Fatalf("B's Run returned %v", err)
	}
	cancelOutage()
	after := readLeases(t, ctx, az.ConnectionString(), containerName, conn, expiration)
	counter.count(false)
	counts := counter.counts()
	t.Logf("log lines during the outage, per replica: %v; leases before %v, after %v; owned A %v, B %v", counts, leases, after, owned("A"), owned("B"))
	for _, name := range []string{"A", "B"} {
		for _, msg := range []string{msgGivenUp, msgNotStarted, msgClaimed, msgGiveUpAll} {
			if n := counts[name][msg]; n != 0 {
				t.Errorf("replica %s logged %q %d times while no replica reached the sink, want 0", name, msg, n)
			}
		}
		// logged once the give-up wait (the expiration) ran out, two
		// expirations ago
		if counts[name][msgStay] == 0 {
			t.Errorf("replica %s never logged %q", name, msgStay)
		}
		if owned(name) != 1 {
			t.Errorf("replica %s owns %v partitions after the outage, want 1", name, owned(name))
		}
	}
	if !maps.Equal(leases, after) {
		t.Errorf("leases moved while no replica reached the sink: before %v, after %v", leases, after)
	}

	proxy.Heal()
	before := committedByPartition(t, replicas["A"].reg, replicas["B"].reg)
	waitUntil(t, ctx, replicas["A"].done, "every partition commits again after the heal", func() bool {
		c := committedByPartition(t, replicas["A"].reg, replicas["B"].reg)
		return c["0"] > before["0"] && c["1"] > before["1"]
	})
	pg, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close(context.WithoutCancel(ctx))
	var rows, distinct int
	waitUntil(t, ctx, replicas["A"].done, "every event in the table", func() bool {
		if err := pg.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM public.orders`).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		return rows >= events
	})
	for name, r := range replicas {
		r.stop()
		if err := <-r.done; err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}
	if err := pg.QueryRow(ctx, `SELECT count(*), count(DISTINCT (part, seq)) FROM public.orders`).Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows != events || distinct != events {
		t.Fatalf("PostgreSQL holds %d rows (%d distinct events), want %d", rows, distinct, events)
	}
}

// readLeases returns the live leases of hub conn's $Default consumer group
// in the Blob container: partition -> owner. A lease older than the
// expiration is reported as "expired".
func readLeases(t *testing.T, ctx context.Context, blobConn, containerName, conn string, expiration time.Duration) map[string]string {
	t.Helper()
	cc, err := container.NewClientFromConnectionString(blobConn, containerName, nil)
	if err != nil {
		t.Fatal(err)
	}
	store, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		t.Fatal(err)
	}
	props, err := connstr.EventHubs(conn)
	if err != nil {
		t.Fatal(err)
	}
	// the connector's Blob store keeps the names lowercased, as the other SDKs do
	owners, err := store.ListOwnership(ctx, strings.ToLower(props.FullyQualifiedNamespace), strings.ToLower(*props.EntityPath), strings.ToLower(azeventhubs.DefaultConsumerGroup), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range owners {
		if o.OwnerID == "" || time.Since(o.LastModifiedTime) >= expiration {
			out[o.PartitionID] = fmt.Sprintf("expired (owner %q, renewed %s ago)", o.OwnerID, time.Since(o.LastModifiedTime).Round(time.Millisecond))
			continue
		}
		out[o.PartitionID] = o.OwnerID
	}
	return out
}
