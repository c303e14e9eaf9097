package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// echo starts a server that writes back what it reads, until the test ends.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends msg and reads its echo within d; it returns the read's
// error (a timeout when the proxy holds the traffic back).
func roundTrip(t *testing.T, c net.Conn, msg string, d time.Duration) error {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
	return nil
}

func TestForwards(t *testing.T) {
	c := dial(t, start(t))
	if err := roundTrip(t, c, "hello", 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestBlackholeHoldsThenDelivers: a blackhole forwards nothing and closes
// nothing, on open and new connections; after the heal what was held
// arrives.
func TestBlackholeHoldsThenDelivers(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if err := roundTrip(t, c, "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Fault{Blackhole: true})
	if err := roundTrip(t, c, "during", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read through a blackhole: %v, want a timeout (no answer, no close)", err)
	}
	fresh := dial(t, p) // accepted, then hangs
	if err := roundTrip(t, fresh, "new", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection through a blackhole: %v, want a timeout", err)
	}
	p.Heal()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("during"))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "during" {
		t.Fatalf("after the heal: %q, %v; want the held %q", buf, err, "during")
	}
	if err := roundTrip(t, fresh, "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestBlackholeOn: traffic flows until the client sends the pattern; that
// chunk and everything after it are held, and Triggered is closed.
func TestBlackholeOn(t *testing.T) {
	p := start(t)
	p.Set(Fault{BlackholeOn: []byte("COMMIT")})
	c := dial(t, p)
	if err := roundTrip(t, c, "BEGIN; UPDATE", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Triggered():
		t.Fatal("triggered before the pattern was sent")
	default:
	}
	if err := roundTrip(t, c, "COMMIT", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the chunk with the pattern was answered: %v", err)
	}
	select {
	case <-p.Triggered():
	default:
		t.Fatal("not triggered by the pattern")
	}
}

// TestBlackholeOnReply: the target's chunk holding the pattern is held.
func TestBlackholeOnReply(t *testing.T) {
	p := start(t)
	p.Set(Fault{BlackholeOnReply: []byte("READY")})
	c := dial(t, p)
	if err := roundTrip(t, c, "hello", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(t, c, "READY", 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the reply with the pattern came through: %v", err)
	}
	select {
	case <-p.Triggered():
	default:
		t.Fatal("not triggered by the reply")
	}
}

// TestReset: open connections get a RST; new ones too.
func TestReset(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	if err := roundTrip(t, c, "x", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Set(Fault{Reset: true})
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after a reset: %v, want ECONNRESET", err)
	}
	// A new connection is reset as soon as the proxy accepts it: the RST
	// may already reach the dial (ECONNRESET from connect, seen on a
	// loaded machine) or come with the first read.
	fresh, err := net.Dial("tcp", p.Addr())
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatalf("dial under a reset: %v, want a connection that is then reset, or ECONNRESET", err)
	}
	t.Cleanup(func() { fresh.Close() })
	if err := roundTrip(t, fresh, "y", 10*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("new connection under a reset: %v, want it closed", err)
	}
}

// TestLatencyAndBandwidth: each chunk takes at least the latency each
// way, and a large message at least its size over the bandwidth.
func TestLatencyAndBandwidth(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	p.Set(Fault{Latency: 100 * time.Millisecond})
	start := time.Now()
	if err := roundTrip(t, c, "slow", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("round trip %s under 100ms latency each way, want at least 200ms", d)
	}
	p.Set(Fault{Bandwidth: 64 << 10})
	msg := string(bytes.Repeat([]byte("b"), 32<<10))
	start = time.Now()
	if err := roundTrip(t, c, msg, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("32 KiB there and back at 64 KiB/s took %s, want at least 0.5s", d)
	}
}
