package connector

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/deadletters"
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
	if err := d.Store(deadletters.WithRevision(context.Background(), "0123456789ab"), "1", -1, letters); err != nil {
		t.Fatal(err)
	}
	if err := d.Store(context.Background(), "../escape", -1, letters[:1]); err != nil {
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
	if got[0].SequenceNumber != 4 || got[0].Reason != "amount: not a number" || string(got[0].Body) != string(good.Body) || !got[0].FailedAt.Equal(at) ||
		got[0].Revision != "0123456789ab" {
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

// TestFileDeadLettersReplayOnce stores what replays store: the letters of
// an abandoned flush again, from the same watermark and from a later one,
// after a torn last line, and a flush-time rejection below letters stored
// at write time. Each letter must be in the file once, none missing.
func TestFileDeadLettersReplayOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := NewFileDeadLetters(dir)
	if err != nil {
		t.Fatal(err)
	}
	letter := func(seq int64) sinks.DeadLetter {
		return sinks.DeadLetter{Event: sinktest.Event("3", seq), Reason: fmt.Sprintf("poison %d", seq), FailedAt: time.Now()}
	}
	store := func(committed int64, seqs ...int64) {
		t.Helper()
		var ls []sinks.DeadLetter
		for _, s := range seqs {
			ls = append(ls, letter(s))
		}
		if err := d.Store(ctx, "3", committed, ls); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "3.jsonl")
	store(-1, 2, 5)   // committed with the data up to 9
	store(9, 12, 15)  // a flush that was abandoned
	store(9, 12, 15)  // its replay from the same watermark
	store(9, 12, 15)  // and again
	store(13, 15, 18) // a replay from a later watermark (12 committed meanwhile)
	store(13, 14)     // a flush-time rejection below a letter stored at write time
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// a crash in the middle of a long line (an event's body is in it)
	f.WriteString(`{"partition":"3","sequence_number":20,"body":"` + strings.Repeat("x", 8192))
	f.Close()
	store(13, 20, 21)

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var l record.DeadLetter
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, l.SequenceNumber)
	}
	if want := []int64{2, 5, 12, 15, 18, 14, 20, 21}; !slices.Equal(got, want) {
		t.Fatalf("the file holds letters of seq %v, want %v (each once)", got, want)
	}

	// Lines longer than the chunks the file is read back in.
	big := letter(30)
	big.Event.Body = []byte(`"` + strings.Repeat("y", 200<<10) + `"`)
	for range 2 {
		if err := d.Store(ctx, "4", 21, []sinks.DeadLetter{letter(25), big}); err != nil {
			t.Fatal(err)
		}
	}
	data, err = os.ReadFile(filepath.Join(dir, "4.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 2 {
		t.Fatalf("two letters stored twice, one with a 200 KiB body: %d lines, want 2", n)
	}
}
