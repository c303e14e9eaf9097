package source_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/source"
)

// proxiedHub starts an emulator with hub "orders" of 2 partitions and a
// fault proxy in front of it; it returns the hub's connection string (to
// the emulator itself) and the proxy.
func proxiedHub(t *testing.T) (conn string, proxy *faultproxy.Proxy) {
	t.Helper()
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	conn = srv.ConnectionString("orders")
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	return conn, testenv.Proxy(t, props.FullyQualifiedNamespace)
}

// TestCustomEndpoint: the connection string names an address nothing
// listens on, and custom_endpoint a proxy in front of the emulator. Every
// event arrives (the connections went to the custom endpoint), and the
// checkpoints are kept under the connection string's namespace, so that
// replicas reaching the namespace by different routes share leases and
// checkpoints.
func TestCustomEndpoint(t *testing.T) {
	ctx := testContext(t)
	conn, proxy := proxiedHub(t)
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	deadConn := strings.Replace(conn, "//"+props.FullyQualifiedNamespace, "//"+dead, 1)
	if deadConn == conn {
		t.Fatalf("connection string %q does not name %s", conn, props.FullyQualifiedNamespace)
	}

	const total = 500
	if n, err := produce.Demo(ctx, newProducer(t, conn), produce.DemoOptions{Count: total, Keys: 10, Seed: 3}); err != nil || n != total {
		t.Fatalf("Demo sent %d, %v", n, err)
	}
	store := fileStore(t)
	src := newSource(t, ctx, source.Options{Connection: secretOf(deadConn), Store: store,
		Settings: source.Settings{CustomEndpoint: proxy.Addr(), LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
	rec := newRecorder(total)
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.reached, r, "every event through the custom endpoint", func() string { return fmt.Sprintf("%d received", rec.count()) })
	if err := r.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	cps, err := store.ListCheckpoints(ctx, dead, "orders", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 {
		t.Fatalf("%d checkpoints under the connection string's namespace %s, want 2: %+v", len(cps), dead, cps)
	}
}

func TestCustomEndpointMustNotBeAURL(t *testing.T) {
	err := source.Settings{CustomEndpoint: "amqps://proxy:5671"}.Validate()
	if err == nil || !strings.Contains(err.Error(), "custom_endpoint") {
		t.Fatalf("Validate = %v, want an error naming custom_endpoint", err)
	}
}

// TestPropertiesCallEndsWithItsContext: over a connection that stopped
// answering (a blackhole after the connection was made), the SDK's
// partition-properties call waits for its response whatever the context;
// the source's must end with its context (the lag poller and the claims
// bound it), and the next call must go through a new connection.
func TestPropertiesCallEndsWithItsContext(t *testing.T) {
	ctx := testContext(t)
	conn, proxy := proxiedHub(t)
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), Settings: source.Settings{CustomEndpoint: proxy.Addr()}})
	if _, err := src.PartitionProperties(ctx, "0"); err != nil {
		t.Fatalf("before the blackhole: %v", err)
	}
	proxy.Set(faultproxy.Fault{Blackhole: true})
	ended := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		_, err := src.PartitionProperties(cctx, "0")
		ended <- err
	}()
	select {
	case err := <-ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("PartitionProperties over a dead connection = %v, want its context's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("PartitionProperties over a dead connection did not end with its 500 ms context (30 s later)")
	}
	proxy.Heal()
	if _, err := src.PartitionProperties(ctx, "1"); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}
