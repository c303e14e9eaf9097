package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestQuietPartitionCheckpointAfterStoreOutage: events committed while the
// checkpoint store (Azurite) is down cannot be checkpointed; the replica is
// stopped before the store is back (its final checkpoints fail too). The
// next run, with the store up and no new event in the hub, must still move
// every checkpoint to the sink's watermark: a quiet partition must not keep
// its checkpoint (and the lag it reports) behind its sink.
func TestQuietPartitionCheckpointAfterStoreOutage(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	az := testenv.NewPersistentAzurite(t, t.TempDir())
	_, conn := startHub(t, "orders", 2)
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())

	cfg, sink, reg := memoryConnector(t, "quiet", conn, az.ConnectionString())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	store, err := connector.NewCheckpointStore(ctx, cfg.Connectors[0].Checkpoint, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	partitions := []string{"0", "1"}
	// caughtUp reports whether each partition's stored checkpoint equals the
	// last event the sink committed, and says where each one stands.
	caughtUp := func() (bool, string) {
		cps, err := store.ListCheckpoints(ctx, props.FullyQualifiedNamespace, "orders", azeventhubs.DefaultConsumerGroup, nil)
		if err != nil {
			return false, err.Error()
		}
		stored := map[string]int64{}
		for _, cp := range cps {
			if cp.SequenceNumber != nil {
				stored[cp.PartitionID] = *cp.SequenceNumber
			}
		}
		ok, state := true, ""
		for _, p := range partitions {
			got := sink.Committed(p)
			if len(got) == 0 {
				return false, "partition " + p + " has no event"
			}
			wm := got[len(got)-1]
			cp, has := stored[p]
			state += fmt.Sprintf(" partition %s: sink %d, checkpoint %d (stored %v);", p, wm, cp, has)
			ok = ok && has && cp == wm
		}
		return ok, state
	}
	committed := func() int {
		n := 0
		for _, p := range partitions {
			n += len(sink.Committed(p))
		}
		return n
	}
	run := func() (stop func() error, done chan error) {
		done, cancelRun := runInBackground(ctx, cfg, connector.RunOptions{Registry: reg, Logger: slog.New(slog.DiscardHandler)})
		return func() error { cancelRun(); return <-done }, done
	}
	send := func(n int, seed uint64) {
		t.Helper()
		if got, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: n, Keys: 10, Seed: seed}); err != nil || got != n {
			t.Fatalf("Demo sent %d of %d: %v", got, n, err)
		}
	}

	t0 := time.Now()
	phase := func(what string) { t.Logf("%6.1fs %s", time.Since(t0).Seconds(), what) }
	stop, done := run()
	send(100, 1)
	waitUntil(t, ctx, done, "100 events committed and checkpointed", func() bool {
		ok, _ := caughtUp()
		return committed() == 100 && ok
	})
	phase("first 100 checkpointed")
	az.Stop()
	send(100, 2)
	waitUntil(t, ctx, done, "200 events committed while the checkpoint store is down", func() bool { return committed() == 200 })
	phase("200 committed")
	// Stopped while the store is down: its final checkpoints fail.
	t.Logf("first run, stopped while the store is down: %v", stop())
	if err := az.Start(); err != nil {
		t.Fatal(err)
	}
	if ok, state := caughtUp(); ok {
		t.Fatalf("the checkpoints caught up before the second run:%s", state)
	}

	phase("store back")
	stop, done = run()
	for ok, state := caughtUp(); !ok; ok, state = caughtUp() {
		select {
		case err := <-done:
			t.Fatalf("second run returned %v before the checkpoints caught up:%s", err, state)
		case <-ctx.Done():
			t.Fatalf("the hub quiet, the checkpoints never reached the sink's watermark:%s", state)
		case <-time.After(100 * time.Millisecond):
		}
	}
	phase("caught up")
	if err := stop(); err != nil {
		t.Fatalf("second run: %v", err)
	}
	if n := committed(); n != 200 {
		t.Fatalf("%d events committed, want 200", n)
	}
}

// TestCheckpointStoreDownAtStartWaits: a replica started while its
// checkpoint store (Azurite) is down waits for it, like a sink or a
// namespace down at start, instead of failing its connectors; once the
// store is back it reads every event.
func TestCheckpointStoreDownAtStartWaits(t *testing.T) {
	t.Parallel() // a fault test waits on timers, not CPU: the package runs them together
	az := testenv.NewPersistentAzurite(t, t.TempDir())
	az.Stop()
	_, conn := startHub(t, "orders", 2)
	cfg, sink, reg := memoryConnector(t, "waits", conn, az.ConnectionString())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	logs := &messages{}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Registry: reg, Logger: slog.New(logs)})
	defer stop()
	waitUntil(t, ctx, done, "the connector reports its checkpoint store unavailable", func() bool {
		return logs.has("checkpoint store unavailable at start")
	})
	if err := az.Start(); err != nil {
		t.Fatal(err)
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: 100, Keys: 10, Seed: 3}); err != nil || n != 100 {
		t.Fatalf("Demo sent %d, %v", n, err)
	}
	waitUntil(t, ctx, done, "every event committed once the store is back", func() bool {
		return len(sink.Committed("0"))+len(sink.Committed("1")) == 100
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// memoryConnector loads (with the registry it needs to run) a one-connector config named name (also its Blob
// container) that reads conn into a memory sink and checkpoints in Azurite
// at blobConn.
func memoryConnector(t *testing.T, name, conn, blobConn string) (*connector.Config, *sinktest.Memory, *sinks.Registry) {
	t.Helper()
	sink := sinktest.NewMemory()
	var reg sinks.Registry
	reg.Register("memory", sink.Driver())
	dir := t.TempDir()
	yaml := fmt.Sprintf(`
drain_timeout: 5s
connectors:
  - name: %[1]s
    source: {connection: %[2]q, batch: {max_events: 50, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}
    checkpoint: {blob: {connection: %[3]q, container: %[1]s}}
    errors: {retry: {initial_backoff: 50ms, max_backoff: 1s}, dead_letter: {dir: %[4]s}}
    sink: {type: memory}
`, name, conn, blobConn, filepath.Join(dir, "dead"))
	path := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := connector.Load(path, connector.LoadOptions{Registry: &reg})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, sink, &reg
}
