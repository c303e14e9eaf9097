package connector

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestFileDeadLetters(t *testing.T) {
	dir := t.TempDir()
	d, err := NewFileDeadLetters(filepath.Join(dir, "dl"))
	if err != nil {
		t.Fatal(err)
	}
	good := sinktest.Event("1", 4)
	bin := sinktest.Event("1", 5)
	bin.Body = []byte{0xff, 0xfe}
	bin.Properties = map[string]any{"bad": func() {}} // JSON cannot hold it; the letter must survive
	at := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	letters := []sinks.DeadLetter{{Event: good, Reason: "amount: not a number", FailedAt: at}, {Event: bin, Reason: "invalid JSON", FailedAt: at}}
	if err := d.Store(context.Background(), "1", letters); err != nil {
		t.Fatal(err)
	}
	if err := d.Store(context.Background(), "../escape", letters[:1]); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "dl", "1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []record.DeadLetter
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l record.DeadLetter
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, l)
	}
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2", len(got))
	}
	if got[0].SequenceNumber != 4 || got[0].Reason != "amount: not a number" || string(got[0].Body) != string(good.Body) || !got[0].FailedAt.Equal(at) {
		t.Errorf("first letter = %+v", got[0])
	}
	if got[1].SequenceNumber != 5 || got[1].BodyEncoding != "base64" || string(got[1].Body) != `"//4="` || got[1].Reason != "invalid JSON" {
		t.Errorf("second letter = %+v", got[1])
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "dl"))
	for _, e := range entries {
		if e.Name() != "1.jsonl" && filepath.Ext(e.Name()) != ".jsonl" {
			t.Errorf("unexpected file %s", e.Name())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "escape.jsonl")); err == nil {
		t.Error("a partition ID escaped the dead-letter directory")
	}
}
