package jsonfiles_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/cli"
	"github.com/ehsink/ehsink/cli/devenv"
)

// replayConfig is a connector reading the emulator at listen into
// jsonfiles under dir; amount is the mapping's amount type and extra more
// connector keys.
func replayConfig(dir, listen, amount, extra string) string {
	return `
drain_timeout: 5s
emulator: {listen: ` + listen + `, hubs: {orders: 1}}
connectors:
  - name: orders
    source: {connection: emulator, eventhub: orders, batch: {max_events: 10, max_wait: 100ms}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "checkpoints") + `}}
    errors: {dead_letter: {dir: ` + filepath.Join(dir, "dead") + `}}` + extra + `
    sink:
      type: jsonfiles
      dir: ` + filepath.Join(dir, "out") + `
      columns:
        id: {from: $.id, nullable: false}
        amount: {from: $.amount, type: "` + amount + `"}
        seq: {from: "@sequence_number", type: bigint}
`
}

// TestDeadLettersReplay: `deadletters replay` for a custom sink, whose
// letters the runner keeps in files. A real run whose mapping refuses some
// events (amounts beyond decimal(4,2), an event without its id) writes
// rows and dead-letter files; the config is then corrected (the amount
// widened, test events filtered out). A replay cancelled after its first
// letter, then a replay of all, leave exactly the rows a correct first run
// makes, each once, and the partition's watermark where the run left it;
// a second replay writes nothing.
func TestDeadLettersReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := write("first.yaml", replayConfig(dir, listen, "decimal(4,2)", ""))
	fixed := write("fixed.yaml", replayConfig(dir, listen, "decimal(7,2)", `
    filter: {drop: "$.test == true"}`))
	events := write("events.jsonl", strings.Join([]string{
		`{"id":"o-1","amount":12.5}`,
		`{"id":"o-2","amount":1234.5}`,
		`{"id":"o-3","amount":3}`,
		`{"id":"o-4","amount":99999.99}`,
		`{"amount":5}`,
		`{"id":"t-1","amount":500,"test":true}`,
		`{"id":"o-7","amount":7}`,
	}, "\n")+"\n")
	run := func(ctx context.Context, stdout io.Writer, args ...string) (int, string) {
		var errOut bytes.Buffer
		code := cli.Main(ctx, args, cli.Options{DevEnv: devenv.New(), Stdout: stdout, Stderr: &errOut})
		return code, errOut.String()
	}
	command := func(args ...string) (int, string) {
		t.Helper()
		var out bytes.Buffer
		code, stderr := run(ctx, &out, args...)
		t.Logf("%s: exit %d\n%s%s", strings.Join(args[:2], " "), code, out.String(), stderr)
		return code, out.String()
	}
	out := filepath.Join(dir, "out")

	runCtx, stopRun := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { code, _ := run(runCtx, io.Discard, "run", "-c", first); done <- code }()
	waitUntil(t, ctx, done, "the emulator listening", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _ := command("send", "-c", first, "--file", events); code != 0 {
		t.Fatal("send failed")
	}
	waitUntil(t, ctx, done, "3 rows and 4 dead letters", func() bool {
		return len(rowsIn(t, out)) == 3 && lines(t, filepath.Join(dir, "dead", "0.jsonl")) == 4
	})
	stopRun()
	if code := <-done; code != 0 {
		t.Fatalf("run: exit %d", code)
	}

	if code, list := command("deadletters", "list", "-c", fixed); code != 0 || !strings.Contains(list, "4 letter(s)") {
		t.Fatalf("list: exit %d, want 4 letters", code)
	}
	if code, dry := command("deadletters", "replay", "-c", fixed, "--dry-run"); code != 1 || !strings.Contains(dry, "2 would be replayed (dry run: nothing written), 1 dropped by the filter, 1 failed again") {
		t.Fatalf("dry run: exit %d, want 2 replayed, 1 dropped, 1 failed again (exit 1)", code)
	}
	if got := rowsIn(t, out); len(got) != 3 {
		t.Fatalf("the dry run wrote: %q", got)
	}

	// A replay cancelled (as by Ctrl-C) once it has reported its first
	// letter; then a replay of all.
	cctx, cancelReplay := context.WithCancel(ctx)
	stopped := &cancelOnWrite{w: io.Discard, cancel: cancelReplay}
	if code, stderr := run(cctx, stopped, "deadletters", "replay", "-c", fixed); code != 1 || !strings.Contains(stderr, "context canceled") {
		t.Fatalf("cancelled replay: exit %d, stderr %s; want 1 and the cancellation", code, stderr)
	}
	cancelReplay()
	if got := rowsIn(t, out); len(got) != 4 {
		t.Fatalf("the cancelled replay left %q, want the first letter's row written", got)
	}
	if code, all := command("deadletters", "replay", "-c", fixed); code != 1 || !strings.Contains(all, "3 letter(s): 1 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("replay: exit %d", code)
	}
	want := []string{"o-1|12.50|0", "o-2|1234.50|1", "o-3|3.00|2", "o-4|99999.99|3", "o-7|7.00|6"}
	if got := rowsIn(t, out); !slices.Equal(got, want) {
		t.Fatalf("after the replay the sink holds %q, want what a correct first run writes %q", got, want)
	}
	if code, again := command("deadletters", "replay", "-c", fixed); code != 1 || !strings.Contains(again, "2 letter(s): 0 replayed, 1 dropped by the filter, 1 failed again") {
		t.Fatalf("second replay: exit %d", code)
	}
	if got := rowsIn(t, out); !slices.Equal(got, want) {
		t.Fatalf("the second replay wrote: %q", got)
	}
	// The partition's own watermark is the run's: its last file ends at 6.
	files, _ := filepath.Glob(filepath.Join(out, "0", "*.jsonl"))
	slices.Sort(files)
	if len(files) == 0 || !strings.HasSuffix(files[len(files)-1], fmt.Sprintf("-%020d.jsonl", 6)) {
		t.Fatalf("partition 0's files %q, want the last ending at seq 6", files)
	}
}

// rowsIn returns the rows of every partition folder under dir, replay
// partitions included, as "id|amount|seq" sorted by seq.
func rowsIn(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*", "*.jsonl"))
	type row struct {
		ID     string      `json:"id"`
		Amount json.Number `json:"amount"`
		Seq    int64       `json:"seq"`
	}
	var rows []row
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var l struct {
				Body row `json:"body"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rows = append(rows, l.Body)
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return int(a.Seq - b.Seq) })
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%s|%s|%d", r.ID, r.Amount, r.Seq))
	}
	return out
}

// lines counts the lines of the file at path (0 when it is missing).
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// cancelOnWrite cancels a command's context at its first line of output.
type cancelOnWrite struct {
	w      io.Writer
	cancel context.CancelFunc
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("\n")) {
		c.cancel()
	}
	return c.w.Write(p)
}

// waitUntil polls cond until it holds, failing when the run ends first or
// ctx does.
func waitUntil(t *testing.T, ctx context.Context, done <-chan int, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case code := <-done:
			t.Fatalf("run exited %d while waiting for %s", code, what)
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}
