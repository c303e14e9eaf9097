// Package progress draws a one-line progress display (done/total, rate,
// ETA) for long commands, on a terminal only: piped or redirected output
// stays free of carriage returns and redraws.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// IsTerminal reports whether w is a character device (a terminal), the
// only place a redrawn line makes sense.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Bar counts work done and redraws one line at most every interval.
// Its methods are safe for concurrent use.
type Bar struct {
	w        io.Writer
	what     string
	total    int // 0: unknown
	interval time.Duration
	now      func() time.Time

	mu    sync.Mutex // guards the fields below
	done  int
	start time.Time
	drawn time.Time
}

// New returns a Bar that draws to w if w is a terminal, or nil (a nil
// *Bar does nothing), so callers need no check of their own. total is the
// expected count (0 if unknown); what names the unit ("events").
func New(w io.Writer, what string, total int) *Bar {
	if !IsTerminal(w) {
		return nil
	}
	return newBar(w, what, total, time.Now)
}

func newBar(w io.Writer, what string, total int, now func() time.Time) *Bar {
	t := now()
	return &Bar{w: w, what: what, total: total, interval: 250 * time.Millisecond, now: now, start: t}
}

// Add counts n more done and redraws if the last draw is old enough.
func (b *Bar) Add(n int) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done += n
	if t := b.now(); t.Sub(b.drawn) >= b.interval {
		b.drawLocked(t)
	}
}

// Finish draws the final line and ends it with a newline.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.drawLocked(b.now())
	fmt.Fprintln(b.w)
}

func (b *Bar) drawLocked(t time.Time) {
	b.drawn = t
	fmt.Fprintf(b.w, "\r\033[K%s", b.lineLocked(t))
}

// lineLocked is the text of the display at t.
func (b *Bar) lineLocked(t time.Time) string {
	elapsed := t.Sub(b.start)
	rate := 0.0
	if elapsed > 0 {
		rate = float64(b.done) / elapsed.Seconds()
	}
	if b.total <= 0 {
		return fmt.Sprintf("%d %s  %.0f/s  %s", b.done, b.what, rate, elapsed.Round(time.Second))
	}
	line := fmt.Sprintf("%d/%d %s (%.1f%%)  %.0f/s", b.done, b.total, b.what, 100*float64(b.done)/float64(b.total), rate)
	if left := b.total - b.done; left > 0 && rate > 0 {
		line += "  ETA " + time.Duration(float64(left)/rate*float64(time.Second)).Round(time.Second).String()
	}
	return line
}
