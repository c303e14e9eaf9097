package conntest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/stdout"
)

// The lines `ehsink test` compares are the lines the stdout sink's writer
// prints, in both formats.
func TestStdoutLinesMatchTheSink(t *testing.T) {
	key, ct := "c-1", "application/json"
	events := []sinks.Event{
		{Partition: "1", SequenceNumber: 9, Offset: "900", EnqueuedTime: time.Date(2026, 3, 1, 10, 0, 0, 250e6, time.UTC),
			PartitionKey: &key, ContentType: &ct, Properties: map[string]any{"source": "web", "n": 3}, Body: []byte(`{"a": 1}`)},
		{Partition: "0", SequenceNumber: 0, Offset: "0", EnqueuedTime: DefaultEnqueuedTime, Body: []byte("not JSON")},
		{Partition: "0", SequenceNumber: 1, Offset: "1", EnqueuedTime: DefaultEnqueuedTime},
	}
	for _, format := range []string{"json", "raw"} {
		var buf bytes.Buffer
		s := stdout.New(&buf, stdout.Config{Format: format})
		w, _, err := s.Open(context.Background(), "0")
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(context.Background(), events); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		var ours []byte
		target := &stdoutTarget{line: &stdout.Config{Format: format}, raw: format == "raw"}
		for i := range events {
			got := target.apply(context.Background(), &events[i])
			if got.reason != "" {
				t.Fatalf("%s: event %d: %s", format, i, got.reason)
			}
			ours = append(append(ours, got.record...), '\n')
		}
		if !bytes.Equal(ours, buf.Bytes()) {
			t.Errorf("%s: ehsink test's lines:\n%s\nthe stdout sink's:\n%s", format, ours, buf.Bytes())
		}
	}
}
