package delta

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// writeWithLetters writes evs, dead-letters the events Write refused, as
// the runner does, and flushes.
func writeWithLetters(t *testing.T, w sinks.Writer, evs []sinks.Event) (*sinks.Position, error) {
	t.Helper()
	err := w.Write(testCtx(t), evs)
	var be *sinks.BatchError
	if errors.As(err, &be) {
		var letters []sinks.DeadLetter
		for _, f := range be.Failed {
			letters = append(letters, sinks.DeadLetter{Event: evs[f.Index], Reason: f.Err.Error(), FailedAt: time.Now()})
		}
		if err := w.(sinks.DeadLetterer).DeadLetter(testCtx(t), letters); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return w.Flush(testCtx(t))
}

// withBad returns the kit's events from..to of partition p, those of the
// sequence numbers in bad with an amount that does not convert.
func withBad(p string, from, to int64, bad ...int64) []sinks.Event {
	evs := sinktest.Events(p, from, to)
	for i := range evs {
		if slices.Contains(bad, evs[i].SequenceNumber) {
			evs[i] = badEvent(p, evs[i].SequenceNumber)
		}
	}
	return evs
}

// TestDeadLettersCommittedOnce: the letters of a flush are committed to
// the dead-letter table before the data; a process killed between the two
// commits replays the flush, and each letter is stored once, each good
// event once.
func TestDeadLettersCommittedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	w, _, _ := s.Open(testCtx(t), "0")
	if _, err := writeWithLetters(t, w, withBad("0", 0, 9, 3)); err != nil {
		t.Fatal(err)
	}
	// Killed after the letters' commit, before the data's.
	s.setHook(func(step string) error {
		if step == stepDataWritten {
			return errors.New("killed")
		}
		return nil
	})
	if _, err := writeWithLetters(t, w, withBad("0", 10, 19, 12, 17)); err == nil {
		t.Fatal("Flush with a kill succeeded")
	}
	w2, wm, err := newTestSink(t, dir, nil).Open(testCtx(t), "0")
	if err != nil || wm == nil || wm.SequenceNumber != 9 {
		t.Fatalf("reopened at %v, %v; want seq 9", wm, err)
	}
	if _, err := writeWithLetters(t, w2, dedupe.After(withBad("0", 10, 29, 12, 17, 25), wm)); err != nil {
		t.Fatal(err)
	}
	var good []int64
	for s := int64(0); s <= 29; s++ {
		if !slices.Contains([]int64{3, 12, 17, 25}, s) {
			good = append(good, s)
		}
	}
	if got := seqsOf(readRows(t, dir))["0"]; !slices.Equal(got, good) {
		t.Fatalf("the table holds %v, want %v", got, good)
	}
	letters := readRows(t, dir+"_dead_letters")
	var seqs []int64
	for _, r := range letters {
		seqs = append(seqs, r["sequence_number"].(int64))
		if r["partition"] != "0" || !strings.Contains(r["reason"].(string), "amount") || !strings.Contains(r["record"].(string), `"reason"`) {
			t.Fatalf("letter row %v", r)
		}
	}
	if !slices.Equal(seqs, []int64{3, 12, 17, 25}) {
		t.Fatalf("the dead-letter table holds seqs %v, want 3, 12, 17, 25 once each", seqs)
	}
}

// TestLetterWithoutWrite: a letter of an event the runner gave up on
// before the sink saw it is committed, and the watermark moves past it.
func TestLetterWithoutWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	w, _, _ := newTestSink(t, dir, nil).Open(testCtx(t), "0")
	writeFlush(t, w, sinktest.Events("0", 0, 4))
	letter := sinks.DeadLetter{Event: sinktest.Event("0", 5), Reason: "not JSON", FailedAt: time.Now()}
	if err := w.(sinks.DeadLetterer).DeadLetter(testCtx(t), []sinks.DeadLetter{letter}); err != nil {
		t.Fatal(err)
	}
	wm, err := w.Flush(testCtx(t))
	if err != nil || wm == nil || wm.SequenceNumber != 5 {
		t.Fatalf("Flush: %v, %v; want the watermark at seq 5", wm, err)
	}
	if rows := readRows(t, dir+"_dead_letters"); len(rows) != 1 || rows[0]["sequence_number"] != int64(5) {
		t.Fatalf("dead-letter table: %v", rows)
	}
	if _, wm, _ := newTestSink(t, dir, nil).Open(testCtx(t), "0"); wm == nil || wm.SequenceNumber != 5 {
		t.Fatalf("reopened at %v, want seq 5", wm)
	}
}
