package emulator

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// testTimeout bounds every SDK call in tests; it is a deadline for hangs,
// not an assertion about speed.
const testTimeout = 60 * time.Second

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("EMULATOR_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// expectProtocolErrors is a startEmulator option for tests that send
// illegal frames on purpose.
type expectProtocolErrors struct{}

// startEmulator starts an in-process emulator with one hub "orders" of 4
// partitions unless cfg says otherwise, and shuts it down at cleanup.
// The test fails if the emulator closed a connection on a protocol error,
// unless it passes expectProtocolErrors{}: real clients see such a close
// as a dropped connection, so it is an emulator bug until proven otherwise.
func startEmulator(t testing.TB, cfg Config, opts ...expectProtocolErrors) *Server {
	t.Helper()
	if cfg.Hubs == nil {
		cfg.Hubs = []HubConfig{{Name: "orders", Partitions: 4, ConsumerGroups: []string{"cg1"}}}
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if n, errs := srv.ProtocolErrors(); n > 0 && len(opts) == 0 {
			t.Errorf("the emulator closed %d connection(s) on protocol errors: %q", n, errs)
		}
	})
	return srv
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func newProducer(t *testing.T, srv *Server, hubName string) *azeventhubs.ProducerClient {
	t.Helper()
	p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(hubName), "", nil)
	if err != nil {
		t.Fatalf("NewProducerClientFromConnectionString: %v", err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

func newConsumer(t *testing.T, srv *Server, hubName, cg string, opts *azeventhubs.ConsumerClientOptions) *azeventhubs.ConsumerClient {
	t.Helper()
	if cg == "" {
		cg = azeventhubs.DefaultConsumerGroup
	}
	c, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString(hubName), "", cg, opts)
	if err != nil {
		t.Fatalf("NewConsumerClientFromConnectionString: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// sendEvents sends bodies in one batch with the given options.
func sendEvents(t *testing.T, p *azeventhubs.ProducerClient, opts *azeventhubs.EventDataBatchOptions, bodies ...string) {
	t.Helper()
	ctx := testCtx(t)
	batch, err := p.NewEventDataBatch(ctx, opts)
	if err != nil {
		t.Fatalf("NewEventDataBatch: %v", err)
	}
	for _, b := range bodies {
		if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(b)}, nil); err != nil {
			t.Fatalf("AddEventData: %v", err)
		}
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatalf("SendEventDataBatch: %v", err)
	}
}

// receiveN receives exactly n events from a partition client.
func receiveN(t *testing.T, pc *azeventhubs.PartitionClient, n int) []*azeventhubs.ReceivedEventData {
	t.Helper()
	ctx := testCtx(t)
	var out []*azeventhubs.ReceivedEventData
	for len(out) < n {
		evs, err := pc.ReceiveEvents(ctx, n-len(out), nil)
		if err != nil {
			t.Fatalf("ReceiveEvents after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, evs...)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// shortCtx is for calls expected to wait for nothing (for example to
// attach a link before events exist); running out is not a failure.
func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	t.Cleanup(cancel)
	return ctx
}
