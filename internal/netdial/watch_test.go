package netdial_test

import (
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"

	"github.com/ehsink/ehsink/internal/netdial"
)

// TestWatchedConnReportsTraffic: a watched connection tells its current
// listener of every read that returned data and every write the path
// took, and no one once the listener is removed; Watched finds it under a
// TLS client.
func TestWatchedConnReportsTraffic(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	w := netdial.Watch(client)
	defer w.Close()
	var moved atomic.Int32
	w.Notify(func() { moved.Add(1) })

	go func() {
		buf := make([]byte, 4)
		if _, err := server.Read(buf); err == nil {
			_, _ = server.Write(buf)
		}
	}()
	if _, err := w.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := w.Read(buf); err != nil {
		t.Fatal(err)
	}
	if got := moved.Load(); got != 2 {
		t.Errorf("%d reports for a write and a read, want 2", got)
	}

	w.Notify(nil)
	go func() { _, _ = server.Write([]byte("late")) }()
	if _, err := w.Read(buf); err != nil {
		t.Fatal(err)
	}
	if got := moved.Load(); got != 2 {
		t.Errorf("%d reports after the listener was removed, want still 2", got)
	}

	if got, ok := netdial.Watched(tls.Client(w, &tls.Config{InsecureSkipVerify: true})); !ok || got != w {
		t.Errorf("Watched(tls.Client(w)) = %p, %v; want w", got, ok)
	}
	if _, ok := netdial.Watched(server); ok {
		t.Error("Watched found a watched connection under a plain one")
	}
}
