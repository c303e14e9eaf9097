package source_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/source"
)

// TestNewFailsFast: each wrong setting ends New with one error that names
// the hub and the cause, before the test's deadline (so not by a retry loop
// running into it).
func TestNewFailsFast(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{
		Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2, ConsumerGroups: []string{"audit"}}},
		Keys: map[string]secret.String{"app": "c2VjcmV0LWtleS12YWx1ZQ=="},
	})
	good := srv.ConnectionString("orders")

	// a port nobody listens on
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().String()
	ln.Close()

	tests := []struct {
		name   string
		conn   string
		hub    string
		group  string
		is     error
		says   []string
		secret string // must not appear in the error
	}{
		{name: "good", conn: good},
		{name: "good declared consumer group", conn: good, group: "audit"},
		{name: "wrong key", conn: strings.Replace(good, "c2VjcmV0LWtleS12YWx1ZQ==", "d3Jvbmcta2V5", 1), is: source.ErrUnauthorized,
			says: []string{`event hub "orders"`, "refused"}, secret: "d3Jvbmcta2V5"},
		{name: "unreachable namespace", conn: strings.Replace(good, srv.Addr(), closedAddr, 1),
			says: []string{`event hub "orders"`, "cannot reach"}, secret: "c2VjcmV0LWtleS12YWx1ZQ=="},
		{name: "unknown hub", conn: strings.Replace(good, "EntityPath=orders", "EntityPath=invoices", 1), is: source.ErrNotFound,
			says: []string{`event hub "invoices"`, "not found"}},
		{name: "missing consumer group", conn: good, group: "billing", is: source.ErrNotFound,
			says: []string{`consumer group "billing"`, `event hub "orders"`, "not found"}},
		{name: "malformed connection string", conn: "Endpoint=nonsense", says: []string{"connection string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := source.New(ctx, source.Options{Connection: secretOf(tt.conn), Store: fileStore(t), Settings: source.Settings{ConsumerGroup: tt.group}})
			if tt.says == nil {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				_ = src.Close(ctx)
				return
			}
			if err == nil {
				_ = src.Close(ctx)
				t.Fatal("New succeeded")
			}
			t.Logf("error: %v", err)
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				t.Fatalf("New ran into the deadline instead of failing fast: %v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error does not match %v", tt.is)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q", s)
				}
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error contains the key")
			}
		})
	}
}

// TestProbeReadsAHeldPartition: New checks the consumer group on a partition
// that holds an event, where its probe ends as soon as the link opens, not
// on partition 0, which is empty here and would hold every start for the
// probe's whole timeout.
func TestProbeReadsAHeldPartition(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	conn := srv.ConnectionString("orders")
	lines := strings.NewReader("a\nb\n")
	if n, err := produce.Lines(ctx, newProducer(t, conn), lines, produce.LinesOptions{PartitionID: "2"}); err != nil || n != 2 {
		t.Fatalf("sent %d events: %v", n, err)
	}
	var logs testenv.LogBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := source.New(ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), Logger: logger})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = src.Close(ctx)
	if want := `msg="consumer group checked" eventhub=orders`; !strings.Contains(logs.String(), want) {
		t.Fatalf("no %q in the log:\n%s", want, logs.String())
	}
	if !strings.Contains(logs.String(), "consumer_group=$Default partition=2\n") {
		t.Fatalf("the probe did not read partition 2, the only one holding events:\n%s", logs.String())
	}
}
