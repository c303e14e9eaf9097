package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader in two goroutines.
type syncBuffer struct {
	mu  chan struct{}
	buf bytes.Buffer
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{mu: make(chan struct{}, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu <- struct{}{}
	defer func() { <-b.mu }()
	return b.buf.String()
}

// TestStatusTable runs `ehsink run --http` in-process on the emulator and
// reads its connectors with `ehsink status`: one line per owned partition,
// with the connector's state, its owner and a lag of 0 on an empty hub.
func TestStatusTable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	cfg := writeConfig(t, `
emulator: {hubs: {orders: 2}}
connectors:
  - name: orders
    source:
      connection: emulator
      eventhub: orders
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 4s}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    sink: {type: stdout}
`)
	ctx, cancel := context.WithCancel(t.Context())
	logs := newSyncBuffer()
	done := make(chan struct{})
	runCode := -1
	go func() {
		defer close(done)
		runCode = dispatch(ctx, []string{"run", "-c", cfg, "--http", addr}, io.Discard, logs)
	}()
	defer func() {
		cancel()
		<-done
		if runCode != exitOK {
			t.Errorf("ehsink run exited %d:\n%s", runCode, logs.String())
		}
	}()

	var out string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var code int
		var errOut string
		code, out, errOut = cli(t, "status", "--addr", addr)
		// Both partitions owned, and their lag known (properties read).
		if code == exitOK && lagsKnown(out) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ehsink status never showed both partitions running (exit %d):\n%s%s\nlogs:\n%s", code, out, errOut, logs.String())
		}
		select {
		case <-done:
			t.Fatalf("ehsink run exited early:\n%s", logs.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header := strings.Fields(lines[0])
	if strings.Join(header, " ") != "CONNECTOR STATE PARTITION OWNER WATERMARK CHECKPOINT LAST ENQUEUED LAG LAG TIME EVENTS/S" {
		t.Errorf("header %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		// orders running 0 OWNER - - - 0 0s -
		if len(f) != 10 || f[0] != "orders" || f[1] != "running" || f[3] == "-" || f[7] != "0" || f[9] != "-" {
			t.Errorf("status line %q: want connector, running, partition, an owner, lag 0 and no rate on a first sample", l)
		}
	}

	// --watch redraws in place until interrupted; from the second draw on
	// the rate column has a value (0.0 on an idle hub).
	const clear = "\x1b[H\x1b[2J"
	wctx, wcancel := context.WithCancel(t.Context())
	wout, werr := newSyncBuffer(), newSyncBuffer()
	watched := make(chan int, 1)
	go func() {
		watched <- dispatch(wctx, []string{"status", "--addr", addr, "--watch", "--interval", "200ms"}, wout, werr)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	for deadline := time.Now().Add(time.Minute); strings.Count(wout.String(), clear) < 3; {
		select {
		case code := <-watched:
			t.Fatalf("status --watch exited %d before it was interrupted: %s", code, werr.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("status --watch drew %d times in a minute:\n%s", strings.Count(wout.String(), clear), wout.String())
		}
	}
	tick.Stop()
	wcancel()
	if code := <-watched; code != exitOK {
		t.Errorf("status --watch exited %d after the interrupt: %s", code, werr.String())
	}
	draws := strings.Split(wout.String(), clear)
	if last := draws[len(draws)-1]; !strings.Contains(last, " 0.0\n") {
		t.Errorf("a later draw has no rate:\n%s", last)
	}

	if code, _, errOut := cli(t, "status", "--addr", "127.0.0.1:1"); code != exitFailure || !strings.Contains(errOut, "/v1/connectors") {
		t.Errorf("status against nothing: exit %d, %q; want 1 naming the request", code, errOut)
	}
}

// lagsKnown counts the partition lines of a status table whose LAG column
// (the 8th) has a value.
func lagsKnown(table string) int {
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		if f := strings.Fields(l); len(f) == 10 && f[7] != "-" {
			n++
		}
	}
	return n
}
