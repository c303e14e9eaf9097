package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestShippedConfigRunsAndResumes runs the repository's connectors.yaml as
// `make run` does, twice, each stopped by one SIGINT: both runs exit 0, the
// stdout connector prints every event once across the two runs (the second
// run resumes, it does not restart), and the Parquet connector's files
// cover each partition's events without overlap.
func TestShippedConfigRunsAndResumes(t *testing.T) {
	dir := t.TempDir()
	shipped, err := os.ReadFile(filepath.Join(root, "connectors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(cfg, shipped, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	type key struct {
		partition string
		seq       int64
	}
	seen := map[key]int{}
	for run := 1; run <= 2; run++ {
		lines, logs := runShipped(t, ctx, cfg, 10)
		if run == 1 {
			checkStory(t, logs)
		}
		for _, l := range lines {
			// The shipped stdout connector maps a short line of columns.
			var ev struct {
				Partition      string `json:"partition"`
				SequenceNumber int64  `json:"seq"`
				OrderID        string `json:"order_id"`
			}
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("run %d: stdout line %q is not a JSON line: %v", run, l, err)
			}
			if !strings.HasPrefix(ev.OrderID, "o-") || len(l) > 160 {
				t.Fatalf("run %d: stdout line %q is not a short line of a demo order", run, l)
			}
			seen[key{ev.Partition, ev.SequenceNumber}]++
		}
	}
	// Every partition's events, across both runs, are 0..n once each.
	last := map[string]int64{}
	for k, n := range seen {
		if n > 1 {
			t.Errorf("partition %s seq %d printed %d times", k.partition, k.seq, n)
		}
		last[k.partition] = max(last[k.partition], k.seq)
	}
	for p, l := range last {
		for s := int64(0); s <= l; s++ {
			if seen[key{p, s}] == 0 {
				t.Errorf("partition %s seq %d never printed (last %d)", p, s, l)
			}
		}
	}

	// The Parquet files of each partition cover disjoint ranges.
	files, err := filepath.Glob(filepath.Join(dir, ".ehsink", "parquet", "orders", "partition=*", "date=*", "*.parquet"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Parquet files written (%v)", err)
	}
	rows := readOutput(t, filepath.Join(dir, ".ehsink", "parquet"))
	if len(rows) == 0 {
		t.Fatal("the Parquet files hold no rows")
	}
	ids := map[string]int{}
	for _, r := range rows {
		ids[r.OrderID]++
		if ids[r.OrderID] > 1 {
			t.Errorf("order %s written twice to Parquet", r.OrderID)
		}
	}
}

// checkStory checks that the logs of the shipped config say what runs and
// where it writes, one line per committed Parquet file, with no empty or
// out-of-order fields.
func checkStory(t *testing.T, logs string) {
	t.Helper()
	for _, want := range []string{
		`msg="built-in Event Hubs emulator started"`,
		`connection="Endpoint=sb://127.0.0.1:`,
		`msg="demo producer started" eventhub=orders`,
		`rate=5/s`,
		`connector=orders-to-stdout eventhub=orders consumer_group=$Default sink=stdout writes_to="stdout, one line of partition, seq, order_id, customer, amount, currency per event"`,
		`connector=orders-to-parquet eventhub=orders consumer_group=parquet sink=parquet writes_to="Parquet files in .ehsink/parquet`,
		`msg="partition claimed"`,
		`msg="parquet file committed"`,
		`file=".ehsink/parquet/orders/partition=`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s:\n%s", want, logs)
		}
	}
	for _, noise := range []string{`selected=[]`, `amqps_addr=""`, `err=<nil>`, `msg="partition starts"`} {
		if strings.Contains(logs, noise) {
			t.Errorf("the logs hold %s:\n%s", noise, logs)
		}
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Count(l, "connector=") > 1 {
			t.Errorf("a log line names the connector twice: %s", l)
		}
	}
}

// runShipped runs `ehsink run` in the config's folder until the stdout
// connector printed at least want lines, stops it with one SIGINT, checks it
// exits 0, and returns every stdout line and the logs (stderr).
func runShipped(t *testing.T, ctx context.Context, cfg string, want int) ([]string, string) {
	t.Helper()
	cmd := exec.Command(binary, "run", "-c", cfg)
	cmd.Dir = filepath.Dir(cfg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	enough := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			if len(lines) == want {
				close(enough)
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case <-enough:
	case <-read:
		t.Fatalf("ehsink run ended before printing %d events:\n%s", want, stderr.String())
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		t.Fatalf("ehsink run printed fewer than %d events:\n%s", want, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-read
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ehsink run after one SIGINT: %v (want exit 0)\n%s", err, stderr.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return lines, stderr.String()
}
