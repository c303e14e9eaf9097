package stdout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// lockedBuffer is an io.Writer tests can read while sinks write to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines(t *testing.T) []record.Event {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []record.Event
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var e record.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q is not a JSON envelope: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	outs := map[string]*lockedBuffer{}
	out := func(t *testing.T) *lockedBuffer {
		mu.Lock()
		defer mu.Unlock()
		if outs[t.Name()] == nil {
			outs[t.Name()] = &lockedBuffer{}
		}
		return outs[t.Name()]
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return newSink(out(t), Config{}) },
		Committed: func(t *testing.T, p string) []int64 {
			var seqs []int64
			for _, e := range out(t).lines(t) {
				if e.Partition == p {
					seqs = append(seqs, e.SequenceNumber)
				}
			}
			return seqs
		},
		NoWatermark: true,
	})
}

func TestEnvelope(t *testing.T) {
	var buf lockedBuffer
	s := newSink(&buf, Config{})
	w, wm, err := s.Open(context.Background(), "2")
	if err != nil || wm != nil {
		t.Fatalf("Open = %v, %v; want no watermark", wm, err)
	}
	json1 := sinktest.Event("2", 7)
	bin := sinktest.Event("2", 8)
	bin.Body = []byte{0xff, 0x00, 'x'}
	bin.PartitionKey = nil
	if err := w.Write(context.Background(), []sinks.Event{json1, bin}); err != nil {
		t.Fatal(err)
	}
	if got := buf.lines(t); len(got) != 0 {
		t.Fatalf("lines visible before Flush: %d", len(got))
	}
	pos, err := w.Flush(context.Background())
	if err != nil || pos == nil || pos.SequenceNumber != 8 {
		t.Fatalf("Flush = %v, %v; want seq 8", pos, err)
	}
	got := buf.lines(t)
	if len(got) != 2 {
		t.Fatalf("got %d lines, want 2", len(got))
	}
	if got[0].SequenceNumber != 7 || got[0].Partition != "2" || got[0].Offset != json1.Offset ||
		!got[0].EnqueuedTime.Equal(json1.EnqueuedTime) || got[0].PartitionKey == nil || *got[0].PartitionKey != *json1.PartitionKey ||
		got[0].Properties["source"] != "sinktest" || string(got[0].Body) != string(json1.Body) || got[0].BodyEncoding != "" {
		t.Errorf("JSON event envelope = %+v", got[0])
	}
	if got[1].BodyEncoding != "base64" || string(got[1].Body) != `"/wB4"` || got[1].PartitionKey != nil {
		t.Errorf("binary event envelope = %+v, body %s", got[1], got[1].Body)
	}
}

func TestRawFormat(t *testing.T) {
	var buf lockedBuffer
	s := newSink(&buf, Config{Format: "raw"})
	w, _, _ := s.Open(context.Background(), "0")
	if err := w.Write(context.Background(), sinktest.Events("0", 0, 2)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.buf.String()), "\n")
	want := []string{string(sinktest.Event("0", 0).Body), string(sinktest.Event("0", 1).Body), string(sinktest.Event("0", 2).Body)}
	if !slices.Equal(lines, want) {
		t.Fatalf("raw lines = %q, want %q", lines, want)
	}
}

func TestValidate(t *testing.T) {
	if err := (&Config{Format: "xml", Output: "file"}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "format: unknown format") || !strings.Contains(err.Error(), "output: unknown output") {
		t.Fatalf("Validate = %v, want both fields named", err)
	}
	if err := (&Config{}).Validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
}

// TestColumns: with columns, each line is a JSON object of the mapped
// values in the columns' order, and an event that does not map is
// reported by index.
func TestColumns(t *testing.T) {
	cols := mapping.Columns{}
	for _, c := range [][3]string{{"seq", "@sequence_number", ""}, {"order_id", "$.order_id", ""}, {"amount", "$.amount", "decimal(8,2)"}, {"at", "$.at", "timestamp"}} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	cfg := Config{Format: "json", Columns: cols}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	s := newSink(&out, cfg)
	w, _, err := s.Open(context.Background(), "0")
	if err != nil {
		t.Fatal(err)
	}
	events := []sinks.Event{
		{Partition: "0", SequenceNumber: 7, Body: []byte(`{"order_id":"o-1","amount":"12.345","at":"2026-01-02T03:04:05Z","extra":[1,2,3]}`)},
		{Partition: "0", SequenceNumber: 8, Body: []byte(`{"order_id":"o-2","amount":"lots"}`)},
	}
	err = w.Write(context.Background(), events)
	var be *sinks.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 1 || !strings.Contains(be.Failed[0].Err.Error(), `column "amount"`) {
		t.Fatalf("Write = %v, want event 1 refused for its amount", err)
	}
	if _, err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := `{"seq":7,"order_id":"o-1","amount":12.35,"at":"2026-01-02T03:04:05Z"}` + "\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if err := (&Config{Format: "raw", Columns: cols}).Validate(); err == nil || !strings.Contains(err.Error(), "columns: used with format json") {
		t.Errorf("raw format with columns: %v", err)
	}
}

// The lines the writer prints are Config.Line's, which `ehsink test`
// compares, in both formats (with a property JSON cannot hold failing
// alike).
func TestWriterPrintsConfigLines(t *testing.T) {
	key := "c-1"
	events := []sinks.Event{
		{Partition: "1", SequenceNumber: 9, Offset: "900", PartitionKey: &key, Properties: map[string]any{"source": "web", "n": 3}, Body: []byte(`{"a": 1}`)},
		{Partition: "0", SequenceNumber: 0, Offset: "0", Body: []byte("not JSON")},
		{Partition: "0", SequenceNumber: 1, Offset: "1"},
	}
	for _, format := range []string{"json", "raw"} {
		cfg := Config{Format: format}
		var buf bytes.Buffer
		w, _, err := newSink(&buf, cfg).Open(context.Background(), "0")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(context.Background(), events); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range events {
			line, err := cfg.Line(&events[i])
			if err != nil {
				t.Fatalf("%s: event %d: %v", format, i, err)
			}
			want = append(append(want, line...), '\n')
		}
		if !bytes.Equal(want, buf.Bytes()) {
			t.Errorf("%s: Config.Line:\n%s\nthe writer:\n%s", format, want, buf.Bytes())
		}
	}
}
