package connector_test

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/produce"
)

// TestSourceDownAtStartWaits starts a connector while its namespace does
// not answer. It must wait (not fail), then read every event once the
// namespace is up, without a restart.
func TestSourceDownAtStartWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens until the emulator starts below
	conn := "Endpoint=sb://" + addr + ";SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=orders;UseDevelopmentEmulator=true"

	dir := t.TempDir()
	const events = 300
	yaml := `
drain_timeout: 10s
connectors:
  - name: waits
    source: {connection: "` + conn + `", batch: {max_events: 100, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    errors: {retry: {initial_backoff: 50ms, max_backoff: 500ms}}
    sink:
      type: parquet
      dir: ` + filepath.Join(dir, "parquet") + `
      max_rows: 100
      max_age: 500ms
      columns:
        - {name: order_id, from: $.order_id, type: string}
`
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	logs := &messages{}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(logs)})
	defer stop()
	waitUntil(t, ctx, done, "the connector to report its source unavailable", func() bool {
		return logs.has("source unavailable at start")
	})

	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the address the connector waits for was taken meanwhile: %v", err)
	}
	srv, err := emulator.New(emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: events, Keys: 10, Seed: 3}); err != nil || n != events {
		t.Fatalf("Demo sent %d, %v", n, err)
	}
	waitUntil(t, ctx, done, "every event committed once the namespace answers", func() bool {
		return sumMetric(t, reg, "ehsink_events_committed_total", "waits") >= events
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := sumMetric(t, reg, "ehsink_events_committed_total", "waits"); got != events {
		t.Errorf("%v events committed, want %d", got, events)
	}
}

// messages is a slog handler that keeps the messages it is given.
type messages struct {
	mu   sync.Mutex
	msgs []string
}

func (m *messages) Enabled(context.Context, slog.Level) bool { return true }
func (m *messages) WithAttrs([]slog.Attr) slog.Handler       { return m }
func (m *messages) WithGroup(string) slog.Handler            { return m }
func (m *messages) Handle(_ context.Context, r slog.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs = append(m.msgs, r.Message)
	return nil
}

func (m *messages) has(sub string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.msgs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
