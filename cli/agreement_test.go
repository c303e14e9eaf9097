package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
)

// TestValidateRunAgree runs `validate` and `run` over the same fixtures
// (testdata/agreement): a config validate accepts gets past the config
// stage of run (run logs "connector started", which comes after the sink,
// runner and source options are built and checked), and an invalid one
// is reported by both with its path and exit 2. Each fixture's first line
// says which: "# valid: ..." or "# want: PATH".
func TestValidateRunAgree(t *testing.T) {
	emu := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	t.Setenv("EVENTHUB_CONNECTION", emu.ConnectionString("orders"))
	files, err := filepath.Glob(filepath.Join("testdata", "agreement", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			t.Setenv("STATE", t.TempDir())
			text, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			first, _, _ := strings.Cut(string(text), "\n")
			want, invalid := strings.CutPrefix(first, "# want: ")
			if !invalid && !strings.HasPrefix(first, "# valid: ") {
				t.Fatalf("first line %q: want '# valid: ...' or '# want: PATH'", first)
			}
			vcode, _, verr := cli(t, "validate", "-c", file)
			if invalid {
				// A config run takes starts its connectors and retries
				// what they cannot reach: bounded, so that the test
				// fails instead of waiting for ever.
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				var rerr bytes.Buffer
				rcode := dispatch(ctx, []string{"run", "-c", file}, io.Discard, &rerr)
				for _, r := range []struct {
					cmd    string
					code   int
					stderr string
				}{{"validate", vcode, verr}, {"run", rcode, rerr.String()}} {
					if r.code != exitUsage || !strings.Contains(r.stderr, "  "+want+": ") {
						t.Errorf("%s: exit %d, want %d with %s; stderr:\n%s", r.cmd, r.code, exitUsage, want, r.stderr)
					}
				}
				return
			}
			if vcode != exitOK {
				t.Fatalf("validate: exit %d; stderr:\n%s", vcode, verr)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			logs := &startWatch{started: make(chan struct{})}
			done := make(chan int, 1)
			go func() { done <- dispatch(ctx, []string{"run", "-c", file}, io.Discard, logs) }()
			select {
			case <-logs.started:
			case code := <-done:
				t.Fatalf("run exited %d before its connector started; stderr:\n%s", code, logs.String())
			case <-time.After(2 * time.Minute):
				t.Fatalf("run: no connector started; stderr:\n%s", logs.String())
			}
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("run: exit %d after a clean stop, want 0; stderr:\n%s", code, logs.String())
			}
		})
	}
}

// startWatch collects a run's log and closes started on its first
// "connector started" line.
type startWatch struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	started chan struct{}
	once    sync.Once
}

func (w *startWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(p))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "connector started") {
			w.once.Do(func() { close(w.started) })
		}
	}
	return len(p), nil
}

func (w *startWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
