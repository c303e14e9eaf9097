package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

func TestLine(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	var out bytes.Buffer
	b := newBar(&out, "events", 1000, now)
	at = at.Add(2 * time.Second)
	b.Add(250)
	if got, want := b.lineLocked(at), "250/1000 events (25.0%)  125/s  ETA 6s"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	at = at.Add(100 * time.Millisecond)
	b.Add(10) // within the interval: no redraw
	if n := strings.Count(out.String(), "\r"); n != 1 {
		t.Errorf("%d draws, want 1 (the second Add came within the interval): %q", n, out.String())
	}
	b.Finish()
	if !strings.HasSuffix(out.String(), "\n") || !strings.Contains(out.String(), "260/1000 events") {
		t.Errorf("final draw %q", out.String())
	}

	u := newBar(&out, "events", 0, now)
	at = at.Add(4 * time.Second)
	u.Add(400)
	if got, want := u.lineLocked(at), "400 events  100/s  4s"; got != want {
		t.Errorf("unknown total: line = %q, want %q", got, want)
	}
}

// TestQuietWhenNotATerminal: a buffer, a file and a pipe get no display.
func TestQuietWhenNotATerminal(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]interface{ Write([]byte) (int, error) }{"buffer": &bytes.Buffer{}, "file": f, "pipe": w} {
		if b := New(out, "events", 10); b != nil {
			t.Errorf("%s: got a progress display, want none", name)
		}
	}
	// A character device is taken for a terminal (the display's only test).
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if New(null, "events", 10) == nil {
		t.Error("a character device got no display")
	}
	var nilBar *Bar
	nilBar.Add(1) // a nil Bar does nothing
	nilBar.Finish()
}
