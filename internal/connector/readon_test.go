package connector_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/cli/devenv"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
)

// TestFencedClaimReadsOn runs the Parquet sink through the emulator with
// another writer of the partition committing the first half of what the
// connector holds just before the connector's first flush: the previous
// owner finishing a commit it began before the claim. The real sink fences
// the connector's flush (ErrFenced); the connector reads on after the
// other writer's commit with the partition kept (one claim, no release),
// and the files hold every event once.
func TestFencedClaimReadsOn(t *testing.T) {
	dir := t.TempDir()
	const events = 400
	yaml := `
drain_timeout: 10s
emulator:
  hubs: {orders: 1}
  demo: {eventhub: orders, count: 400, rate: 100000, keys: 20}
connectors:
  - name: raced
    source: {connection: emulator, eventhub: orders, batch: {max_events: 100, max_wait: 200ms}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    sink:
      type: parquet-raced
      dir: ` + filepath.Join(dir, "parquet") + `
      max_rows: 100000
      max_age: 2s
      columns:
        - {name: part, from: "@partition", type: string}
        - {name: seq, from: "@sequence_number", type: int64}
`
	inner, err := (*sinks.Registry)(nil).Lookup("parquet")
	if err != nil {
		t.Fatal(err)
	}
	race := &racedDriver{Driver: inner}
	var reg sinks.Registry
	reg.Register("parquet-raced", race)
	path := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := connector.Load(path, connector.LoadOptions{Registry: &reg})
	if err != nil {
		t.Fatal(err)
	}
	var logs testenv.LogBuffer
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Registry: &reg, DevEnv: devenv.New(),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer stop()
	root := filepath.Join(dir, "parquet")
	var seqs map[int64]int
	waitUntil(t, ctx, done, "the files hold every event", func() bool {
		seqs = committedSeqs(t, root)
		return len(seqs) >= events
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := race.fenced(); err != nil {
		t.Fatal(err)
	}
	seqs = committedSeqs(t, root)
	for seq := range int64(events) {
		if seqs[seq] != 1 {
			t.Fatalf("seq %d is in the files %d times, want once", seq, seqs[seq])
		}
	}
	out := logs.String()
	if n := strings.Count(out, "reading on after its commit"); n != 1 {
		t.Errorf("%d reads on after a fence, want 1", n)
	}
	if n := strings.Count(out, `msg="partition claimed"`); n != 1 {
		t.Errorf("partition claimed %d times, want once (kept through the fence)", n)
	}
}

// committedSeqs counts the sequence numbers in the committed Parquet files
// under root (temporary files are hidden: their names start with a dot).
func committedSeqs(t *testing.T, root string) map[int64]int {
	t.Helper()
	seqs := map[int64]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".parquet") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		tb, err := parquettest.ReadFile(path)
		if err != nil {
			return err
		}
		for _, row := range tb.Rows {
			seqs[row["seq"].(int64)]++
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return seqs
}

// racedDriver builds its driver's sink with writers whose first flush is
// raced by another writer of the same partition (racedWriter).
type racedDriver struct {
	sinks.Driver
	mu     sync.Mutex
	raced  bool
	result error // the raced flush's error
}

func (d *racedDriver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	s, err := d.Driver.New(ctx, cfg, info)
	if err != nil {
		return nil, err
	}
	return racedSink{Sink: s, d: d}, nil
}

// fenced reports whether the raced flush failed with ErrFenced.
func (d *racedDriver) fenced() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case !d.raced:
		return errors.New("no flush was raced")
	case !errors.Is(d.result, sinks.ErrFenced):
		return errors.New("the raced flush returned " + errString(d.result) + ", want ErrFenced")
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

type racedSink struct {
	sinks.Sink
	d *racedDriver
}

func (s racedSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := s.Sink.Open(ctx, partition)
	if err != nil {
		return nil, nil, err
	}
	return &racedWriter{Writer: w, s: s, partition: partition}, wm, nil
}

// racedWriter keeps copies of what it is given; at the first flush of the
// run, another writer of the partition commits the first half of them.
type racedWriter struct {
	sinks.Writer
	s         racedSink
	partition string
	held      []sinks.Event
}

func (w *racedWriter) Write(ctx context.Context, events []sinks.Event) error {
	for _, e := range events {
		e.Body = bytes.Clone(e.Body)
		w.held = append(w.held, e)
	}
	return w.Writer.Write(ctx, events)
}

func (w *racedWriter) FlushDue(now time.Time) bool { return w.Writer.(sinks.Batcher).FlushDue(now) }

func (w *racedWriter) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	return w.Writer.(sinks.DeadLetterer).DeadLetter(ctx, letters)
}

func (w *racedWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	d := w.s.d
	d.mu.Lock()
	first := !d.raced && len(w.held) >= 2
	d.raced = d.raced || first
	d.mu.Unlock()
	if !first {
		w.held = w.held[:0]
		return w.Writer.Flush(ctx)
	}
	other, _, err := w.s.Sink.Open(ctx, w.partition)
	if err != nil {
		return nil, err
	}
	half := w.held[:len(w.held)/2]
	if err := other.Write(ctx, half); err != nil {
		return nil, err
	}
	if _, err := other.Flush(ctx); err != nil {
		return nil, err
	}
	if err := other.Close(ctx); err != nil {
		return nil, err
	}
	pos, err := w.Writer.Flush(ctx)
	d.mu.Lock()
	d.result = err
	d.mu.Unlock()
	w.held = w.held[:0]
	return pos, err
}
