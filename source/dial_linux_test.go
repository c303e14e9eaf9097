package source_test

import (
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/source"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h.
const tcpUserTimeout = 0x12

// socketSettings reads the keepalive and user timeout of a TCP connection.
func socketSettings(c net.Conn) (string, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return "", fmt.Errorf("a %T, not a TCP connection", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return "", err
	}
	var keepalive, idle, user int
	var gerr error
	err = raw.Control(func(fd uintptr) {
		get := func(level, opt int) int {
			v, err := syscall.GetsockoptInt(int(fd), level, opt)
			if err != nil && gerr == nil {
				gerr = err
			}
			return v
		}
		keepalive = get(syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
		idle = get(syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		user = get(syscall.IPPROTO_TCP, tcpUserTimeout)
	})
	if err == nil {
		err = gerr
	}
	return fmt.Sprintf("keepalive=%d idle=%ds user_timeout=%dms", keepalive, idle, user), err
}

// TestEventHubsConnectionsUseNetdial: every AMQP connection of a source
// (the probe, the processor's, the partition-properties one, the reader
// connections) is dialed by internal/netdial, so it carries TCP keepalive
// and TCP_USER_TIMEOUT, and events flow end to end over them.
func TestEventHubsConnectionsUseNetdial(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	conn := srv.ConnectionString("orders")
	const total = 500
	if n, err := produce.Demo(ctx, newProducer(t, conn), produce.DemoOptions{Count: total, Keys: 20, Seed: 3}); err != nil || n != total {
		t.Fatalf("Demo sent %d, %v; want %d", n, err, total)
	}

	want := fmt.Sprintf("keepalive=1 idle=%ds user_timeout=%dms", int(netdial.KeepAliveIdle/time.Second), netdial.UserTimeout.Milliseconds())
	var (
		mu     sync.Mutex
		dialed []string
	)
	opts := source.WithDialed(source.Options{
		Connection: secretOf(conn),
		Store:      fileStore(t),
		Settings:   source.Settings{Connections: 2, LoadBalancing: source.LoadBalancing{Strategy: "greedy"}},
	}, func(c net.Conn) {
		got, err := socketSettings(c)
		if err != nil {
			t.Errorf("dialed connection to %s: %v", c.RemoteAddr(), err)
		}
		if c.RemoteAddr().String() != srv.Addr() {
			t.Errorf("dialed %s, want the emulator at %s", c.RemoteAddr(), srv.Addr())
		}
		mu.Lock()
		dialed = append(dialed, got)
		mu.Unlock()
	})
	src := newSource(t, ctx, opts)
	rec := readAll(t, ctx, src, total)
	checkOncePerKeyInOrder(t, rec.events, total)
	if load := source.ReaderLoad(src); len(load) != 2 {
		t.Errorf("reader connections %v, want 2", load)
	}

	mu.Lock()
	defer mu.Unlock()
	// probe + processor + 2 readers at least (the properties connection
	// opens at its first call).
	if len(dialed) < 4 {
		t.Fatalf("%d connections dialed by netdial, want at least 4 (probe, processor, 2 readers): the SDK dialed the others itself", len(dialed))
	}
	for i, got := range dialed {
		if got != want {
			t.Errorf("connection %d: %s, want %s", i, got, want)
		}
	}
}

// TestReaderConnectionsDialAtOnce: New opens its reader connections at the
// same time, not one after another (each is a TLS handshake and a claim
// against Azure). The dial hook holds every reader's dial until all of them
// have dialed, which one-after-another dialing never gets to.
func TestReaderConnectionsDialAtOnce(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	const readers = 3
	var (
		mu      sync.Mutex
		dials   int
		all     = make(chan struct{})
		serial  bool
		stalled = make(chan struct{})
	)
	stall := time.AfterFunc(20*time.Second, func() { close(stalled) }) // a stall bound, not a measurement
	defer stall.Stop()
	opts := source.WithDialed(source.Options{
		Connection: secretOf(srv.ConnectionString("orders")),
		Store:      fileStore(t),
		Settings:   source.Settings{Connections: readers},
	}, func(net.Conn) {
		mu.Lock()
		dials++
		n := dials
		if n == 1+readers { // the probe's, then the readers'
			close(all)
		}
		mu.Unlock()
		if n == 1 || n > 1+readers {
			return
		}
		select {
		case <-all:
		case <-stalled:
			mu.Lock()
			serial = true
			mu.Unlock()
		}
	})
	src, err := source.New(ctx, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	_ = src.Close(ctx)
	mu.Lock()
	defer mu.Unlock()
	if serial || dials < 1+readers {
		t.Fatalf("the %d reader connections were dialed one after another (%d dials in all)", readers, dials)
	}
}
