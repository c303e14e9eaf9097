package sinktest

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
)

// Harness tells the kit how to build the sink under test and read it back.
type Harness struct {
	// New returns the sink under test. Each call stands for a process start:
	// the sink must see everything that earlier sinks committed, and each
	// test case calls New with its own t, so a harness should give each
	// case a fresh destination (table, directory) keyed by t.Name().
	// Required.
	New func(t *testing.T) sinks.Sink
	// Committed returns the sequence numbers the sink durably holds for a
	// partition, read back independently of the sink (SQL, a file reader),
	// in the order the sink stores them. Required.
	Committed func(t *testing.T, partition string) []int64
	// BadEvent, when set, returns an event the sink must reject as one that
	// cannot be written (a value that does not convert to its column).
	BadEvent func(partition string, seq int64) sinks.Event
	// NoWatermark says the sink keeps no watermark (stdout): Open always
	// reports none, and the restart and replay cases are skipped.
	NoWatermark bool
	// Fencing says the sink drops, at commit time, what another writer of
	// the same partition already committed (or fails the commit with
	// [sinks.ErrFenced]), so two owners at once write nothing twice.
	Fencing bool
	// InterruptCommit, when set, arms the sink s so that the next Flush of
	// one of its writers makes the data durable and then fails before the
	// sink's watermark is, as a process killed between the two steps would.
	// Set it for a sink whose commit has these two steps (data files, then
	// a watermark record); a sink that commits both at once (one
	// transaction, one rename) has no such instant.
	InterruptCommit func(t *testing.T, s sinks.Sink)
}

// Event returns the kit's standard event for a partition and sequence
// number. Its body is JSON with the fields id, seq, customer, amount and ts.
func Event(partition string, seq int64) sinks.Event {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seq) * time.Millisecond)
	key := "c-" + strconv.FormatInt(seq%7, 10)
	body := fmt.Sprintf(`{"id":"%s-%d","seq":%d,"customer":%q,"amount":%d.25,"ts":%q}`,
		partition, seq, seq, key, seq%1000, ts.Format(time.RFC3339Nano))
	return sinks.Event{
		Partition:      partition,
		SequenceNumber: seq,
		Offset:         strconv.FormatInt(seq*1000, 10),
		EnqueuedTime:   ts,
		PartitionKey:   &key,
		Properties:     map[string]any{"source": "sinktest"},
		Body:           []byte(body),
	}
}

// Events returns Event(partition, seq) for seq in [from, to].
func Events(partition string, from, to int64) []sinks.Event {
	out := make([]sinks.Event, 0, to-from+1)
	for s := from; s <= to; s++ {
		out = append(out, Event(partition, s))
	}
	return out
}

// Run runs the conformance cases against the harness, each as a subtest.
// A case that needs a capability the harness does not declare is skipped
// with a message naming the Harness field that enables it (go test -v
// lists it as SKIP); it never passes silently. Failures are reported at
// the caller's call of Run, the sink's test, with the case's name.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil || h.Committed == nil {
		t.Fatal("sinktest: Harness.New and Harness.Committed are required")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Helper()
			if why := c.skip(h); why != "" {
				t.Skip("sinktest: not run: " + why)
			}
			c.run(t, h)
		})
	}
}

// kitCase is one conformance case.
type kitCase struct {
	name string
	run  func(t testing.TB, h Harness)
	// skip says why the case cannot run with h (what the harness does not
	// declare, naming the field), or "".
	skip func(h Harness) string
}

var cases = []kitCase{
	{"FlushedIsVisible", caseFlushedIsVisible, never},
	{"EmptyFlush", caseEmptyFlush, never},
	{"RestartResumesFromWatermark", caseRestartResumes, noWatermark},
	{"CloseWithoutFlushAbandons", caseCloseAbandons, noWatermark},
	{"ReplayWritesNothingTwice", caseReplay, noWatermark},
	{"OrderPerPartition", caseOrder, never},
	{"RejectedEvent", caseRejected, noBadEvent},
	{"TwoOwnersAtOnce", caseTwoOwners, noFencing},
	{"TwoOwnersFromWatermark", caseTwoOwnersFromWatermark, noFencing},
	{"StaleOwnerFlushesLate", caseStaleOwnerFlushesLate, noFencing},
	{"CrashBetweenDataAndWatermark", caseCrashBetweenDataAndWatermark, noInterruptCommit},
	{"DeadLetterReplay", caseDeadLetterReplay, noWatermark},
}

func never(Harness) string { return "" }

func noWatermark(h Harness) string {
	if h.NoWatermark {
		return "Harness.NoWatermark is set: the sink keeps no watermark to resume from"
	}
	return ""
}

func noBadEvent(h Harness) string {
	if h.BadEvent == nil {
		return "Harness.BadEvent is not set: no event this sink must reject"
	}
	return ""
}

func noFencing(h Harness) string {
	if why := noWatermark(h); why != "" {
		return why
	}
	if !h.Fencing {
		return "Harness.Fencing is not set: two owners of a partition are not tested"
	}
	return ""
}

func noInterruptCommit(h Harness) string {
	if why := noWatermark(h); why != "" {
		return why
	}
	if h.InterruptCommit == nil {
		return "Harness.InterruptCommit is not set: a crash between the sink's data commit and its watermark is not tested " +
			"(set the hook for a sink that commits in two steps; see docs/writing-a-sink.md)"
	}
	return ""
}

// A case reports through a testing.TB, so that the kit's own tests can run
// a case against a broken sink and see it fail. The harness's functions get
// the *testing.T of the case's subtest.
type harnessTB interface {
	harnessT() *testing.T
}

func harnessT(t testing.TB) *testing.T {
	switch t := t.(type) {
	case *testing.T:
		return t
	case harnessTB:
		return t.harnessT()
	}
	panic(fmt.Sprintf("sinktest: a case runs on a *testing.T, not a %T", t))
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func open(t testing.TB, s sinks.Sink, partition string) (sinks.Writer, *sinks.Position) {
	t.Helper()
	w, wm, err := s.Open(ctx(t), partition)
	if err != nil {
		t.Fatalf("Open(%s): %v", partition, err)
	}
	return w, wm
}

func newSink(t testing.TB, h Harness) sinks.Sink {
	t.Helper()
	s := h.New(harnessT(t))
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			if t.Failed() { // a consequence of the failure already reported
				t.Logf("Sink.Close after the failure: %v", err)
				return
			}
			t.Errorf("Sink.Close: %v", err)
		}
	})
	return s
}

// writeFlush writes events and flushes, failing the test on any error, and
// returns the watermark Flush reported.
func writeFlush(t testing.TB, w sinks.Writer, events []sinks.Event) *sinks.Position {
	t.Helper()
	if err := w.Write(ctx(t), events); err != nil {
		t.Fatalf("Write: %v", err)
	}
	wm, err := w.Flush(ctx(t))
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return wm
}

// closeWriter closes w. Deferred in a case that failed, a Close error
// follows from that failure: it is logged, not reported as a second one.
func closeWriter(t testing.TB, w sinks.Writer) {
	t.Helper()
	if err := w.Close(ctx(t)); err != nil {
		if t.Failed() {
			t.Logf("Writer.Close after the failure: %v", err)
			return
		}
		t.Fatalf("Writer.Close: %v", err)
	}
}

func wantSeqs(t testing.TB, h Harness, partition string, from, to int64) {
	t.Helper()
	got := h.Committed(harnessT(t), partition)
	want := make([]int64, 0, to-from+1)
	for s := from; s <= to; s++ {
		want = append(want, s)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition %s holds %s, want %s", partition, summarize(got), summarize(want))
	}
}

func wantWatermark(t testing.TB, got *sinks.Position, seq int64) {
	t.Helper()
	if got == nil || got.SequenceNumber != seq {
		t.Fatalf("watermark %v, want seq %d", fmtWatermark(got), seq)
	}
}

func caseFlushedIsVisible(t testing.TB, h Harness) {
	t.Helper()
	s := newSink(t, h)
	w, _ := open(t, s, "0")
	var wm *sinks.Position
	for from := int64(0); from < 50; from += 10 {
		wm = writeFlush(t, w, Events("0", from, from+9))
	}
	closeWriter(t, w)
	if !h.NoWatermark {
		wantWatermark(t, wm, 49)
	}
	wantSeqs(t, h, "0", 0, 49)
}

func caseEmptyFlush(t testing.TB, h Harness) {
	t.Helper()
	s := newSink(t, h)
	w, _ := open(t, s, "0")
	defer closeWriter(t, w)
	if _, err := w.Flush(ctx(t)); err != nil {
		t.Fatalf("Flush with nothing written: %v", err)
	}
	wm := writeFlush(t, w, Events("0", 0, 4))
	again, err := w.Flush(ctx(t))
	if err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	if !h.NoWatermark && (again == nil || wm == nil || again.SequenceNumber != wm.SequenceNumber) {
		t.Fatalf("empty Flush moved the watermark: %s then %s", fmtWatermark(wm), fmtWatermark(again))
	}
	wantSeqs(t, h, "0", 0, 4)
}

func caseRestartResumes(t testing.TB, h Harness) {
	t.Helper()
	first := newSink(t, h)
	w, wm := open(t, first, "3")
	if wm != nil {
		t.Fatalf("fresh destination reports watermark %s, want none", fmtWatermark(wm))
	}
	writeFlush(t, w, Events("3", 0, 19))
	closeWriter(t, w)

	second := newSink(t, h)
	w, wm = open(t, second, "3")
	wantWatermark(t, wm, 19)
	writeFlush(t, w, Events("3", 20, 29))
	closeWriter(t, w)
	wantSeqs(t, h, "3", 0, 29)
}

func caseCloseAbandons(t testing.TB, h Harness) {
	t.Helper()
	s := newSink(t, h)
	w, _ := open(t, s, "1")
	writeFlush(t, w, Events("1", 0, 9))
	if err := w.Write(ctx(t), Events("1", 10, 19)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	closeWriter(t, w) // a lost partition: no flush
	wantSeqs(t, h, "1", 0, 9)

	w, wm := open(t, newSink(t, h), "1")
	wantWatermark(t, wm, 9)
	writeFlush(t, w, dedupe.After(Events("1", 0, 19), wm))
	closeWriter(t, w)
	wantSeqs(t, h, "1", 0, 19)
}

func caseReplay(t testing.TB, h Harness) {
	t.Helper()
	// A crash after the sink committed and before the checkpoint: the next
	// process reads again from the old checkpoint, and the runner drops
	// what the sink's watermark covers.
	s := newSink(t, h)
	w, _ := open(t, s, "2")
	writeFlush(t, w, Events("2", 0, 19))
	closeWriter(t, w)

	w, wm := open(t, newSink(t, h), "2")
	wantWatermark(t, wm, 19)
	replay := Events("2", 0, 29)
	for len(replay) > 0 {
		n := min(7, len(replay))
		if batch := dedupe.After(replay[:n], wm); len(batch) > 0 {
			wm = writeFlush(t, w, batch)
		}
		replay = replay[n:]
	}
	closeWriter(t, w)
	wantWatermark(t, wm, 29)
	wantSeqs(t, h, "2", 0, 29)
}

func caseOrder(t testing.TB, h Harness) {
	t.Helper()
	s := newSink(t, h)
	partitions := []string{"0", "1", "2", "3"}
	var wg sync.WaitGroup
	errs := make(chan error, len(partitions))
	for _, p := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, _, err := s.Open(ctx(t), p)
			if err != nil {
				errs <- fmt.Errorf("Open(%s): %w", p, err)
				return
			}
			defer w.Close(context.Background())
			for from := int64(0); from < 100; from += 25 {
				if err := w.Write(ctx(t), Events(p, from, from+24)); err != nil {
					errs <- fmt.Errorf("partition %s: Write: %w", p, err)
					return
				}
				if _, err := w.Flush(ctx(t)); err != nil {
					errs <- fmt.Errorf("partition %s: Flush: %w", p, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, p := range partitions {
		wantSeqs(t, h, p, 0, 99)
	}
}

func caseRejected(t testing.TB, h Harness) {
	t.Helper()
	s := newSink(t, h)
	w, _ := open(t, s, "0")
	defer closeWriter(t, w)
	batch := Events("0", 0, 9)
	batch[4] = h.BadEvent("0", 4)
	err := w.Write(ctx(t), batch)
	var be *sinks.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Write with a bad event: got %v, want a *sinks.BatchError", err)
	}
	if len(be.Failed) != 1 || be.Failed[0].Index != 4 || be.Failed[0].Err == nil {
		t.Fatalf("BatchError.Failed = %+v, want one failure at index 4 with a reason", be.Failed)
	}
	if dl, ok := w.(sinks.DeadLetterer); ok {
		letter := sinks.DeadLetter{Event: batch[4], Reason: be.Failed[0].Err.Error(), FailedAt: time.Now()}
		if err := dl.DeadLetter(ctx(t), []sinks.DeadLetter{letter}); err != nil {
			t.Fatalf("DeadLetter: %v", err)
		}
	}
	wm, err := w.Flush(ctx(t))
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if !h.NoWatermark {
		wantWatermark(t, wm, 9)
	}
	got := h.Committed(harnessT(t), "0")
	want := []int64{0, 1, 2, 3, 5, 6, 7, 8, 9}
	if !slices.Equal(got, want) {
		t.Fatalf("partition 0 holds %v, want %v (the rejected event left out, the others kept)", got, want)
	}
}

func caseTwoOwners(t testing.TB, h Harness) {
	t.Helper()
	// Ownership moved while the old owner was paused: both opened at the
	// same watermark and both commit overlapping ranges.
	a, b := newSink(t, h), newSink(t, h)
	wa, _ := open(t, a, "5")
	wb, _ := open(t, b, "5")
	writeFlush(t, wb, Events("5", 0, 19))
	if err := wa.Write(ctx(t), Events("5", 0, 29)); err != nil {
		t.Fatalf("stale owner Write: %v", err)
	}
	if _, err := wa.Flush(ctx(t)); err != nil {
		t.Logf("stale owner Flush failed (allowed): %v", err)
	} else if tr, ok := wa.(sinks.Trimmer); ok {
		// the runner counts as committed what Trimmed does not claim
		if n := tr.Trimmed(); n != 20 {
			t.Fatalf("stale owner's Trimmed() = %d, want 20 (seq 0-19, which the new owner committed)", n)
		}
	}
	closeWriter(t, wa)
	closeWriter(t, wb)
	got := h.Committed(harnessT(t), "5")
	seen := make(map[int64]bool)
	for _, s := range got {
		if seen[s] {
			t.Fatalf("seq %d written twice: %s", s, summarize(got))
		}
		seen[s] = true
	}
	for s := int64(0); s < 20; s++ {
		if !seen[s] {
			t.Fatalf("seq %d missing: %s", s, summarize(got))
		}
	}
}

// fmtWatermark prints a watermark as "seq N (offset O)", or "none".
func fmtWatermark(p *sinks.Position) string {
	if p == nil {
		return "none"
	}
	return p.String()
}

// summarize prints a long sequence list compactly as ranges.
func summarize(seqs []int64) string {
	if len(seqs) == 0 {
		return "[]"
	}
	out := "["
	start, prev := seqs[0], seqs[0]
	flush := func() {
		if out != "[" {
			out += " "
		}
		if start == prev {
			out += strconv.FormatInt(start, 10)
		} else {
			out += fmt.Sprintf("%d-%d", start, prev)
		}
	}
	for _, s := range seqs[1:] {
		if s == prev+1 {
			prev = s
			continue
		}
		flush()
		start, prev = s, s
	}
	flush()
	return out + "]"
}

// wantOnceInOrder fails unless the partition holds every sequence number in
// [from, to] exactly once, in order, and nothing else.
func wantOnceInOrder(t testing.TB, h Harness, partition string, from, to int64) {
	t.Helper()
	got := h.Committed(harnessT(t), partition)
	seen := make(map[int64]bool, len(got))
	for i, s := range got {
		if seen[s] {
			t.Fatalf("partition %s: seq %d written twice: %s", partition, s, summarize(got))
		}
		seen[s] = true
		if i > 0 && s < got[i-1] {
			t.Fatalf("partition %s: seq %d stored after %d: %s", partition, s, got[i-1], summarize(got))
		}
	}
	wantSeqs(t, h, partition, from, to)
}

// commitFirst commits Events(partition, 0, to) through a writer of a sink
// of its own, so that the owners a case starts next find a watermark.
func commitFirst(t testing.TB, h Harness, partition string, to int64) {
	t.Helper()
	w, _ := open(t, newSink(t, h), partition)
	wantWatermark(t, writeFlush(t, w, Events(partition, 0, to)), to)
	closeWriter(t, w)
}

// flushStale flushes the writer of an owner that lost the partition. The
// commit may fail (a fenced sink refuses it); what it must not do is write
// again what the newer owner committed, which the case checks after.
func flushStale(t testing.TB, w sinks.Writer) {
	t.Helper()
	if _, err := w.Flush(ctx(t)); err != nil {
		t.Logf("stale owner's Flush failed (allowed): %v", err)
	}
	closeWriter(t, w)
}

func caseTwoOwnersFromWatermark(t testing.TB, h Harness) {
	t.Helper()
	// As TwoOwnersAtOnce, on a partition that already holds events: both
	// owners open at the same non-nil watermark and read on from it, the
	// stale one further than the new one committed.
	commitFirst(t, h, "6", 9)
	wa, wmA := open(t, newSink(t, h), "6")
	wb, wmB := open(t, newSink(t, h), "6")
	wantWatermark(t, wmA, 9)
	wantWatermark(t, wmB, 9)
	writeFlush(t, wb, dedupe.After(Events("6", 0, 29), wmB))
	if err := wa.Write(ctx(t), dedupe.After(Events("6", 0, 39), wmA)); err != nil {
		t.Fatalf("stale owner Write: %v", err)
	}
	flushStale(t, wa)
	closeWriter(t, wb)

	// Whatever the stale owner's flush did, the partition holds each event
	// once, and a restart resumes right after the last one it holds.
	got := h.Committed(harnessT(t), "6")
	if len(got) == 0 {
		t.Fatal("partition 6 holds nothing")
	}
	w, wm := open(t, newSink(t, h), "6")
	wantWatermark(t, wm, got[len(got)-1])
	writeFlush(t, w, dedupe.After(Events("6", 0, 49), wm))
	closeWriter(t, w)
	wantOnceInOrder(t, h, "6", 0, 49)
}

func caseStaleOwnerFlushesLate(t testing.TB, h Harness) {
	t.Helper()
	// The old owner took a batch before the partition moved, and flushes it
	// only after the new owner committed past it (a long pause: GC, a
	// network partition). The new owner then goes on committing.
	commitFirst(t, h, "7", 9)
	stale, wmA := open(t, newSink(t, h), "7")
	if err := stale.Write(ctx(t), dedupe.After(Events("7", 0, 19), wmA)); err != nil {
		t.Fatalf("stale owner Write: %v", err)
	}
	owner, wmB := open(t, newSink(t, h), "7")
	wantWatermark(t, wmB, 9)
	writeFlush(t, owner, dedupe.After(Events("7", 0, 29), wmB))
	flushStale(t, stale)
	wantWatermark(t, writeFlush(t, owner, Events("7", 30, 39)), 39)
	closeWriter(t, owner)

	_, wm := open(t, newSink(t, h), "7")
	wantWatermark(t, wm, 39)
	wantOnceInOrder(t, h, "7", 0, 39)
}

func caseCrashBetweenDataAndWatermark(t testing.TB, h Harness) {
	t.Helper()
	// The process dies after the data is durable and before the sink's
	// watermark is; no checkpoint follows. The next process reads again
	// from the checkpoint (seq 9) and drops what the sink reports it holds.
	s := newSink(t, h)
	w, _ := open(t, s, "8")
	writeFlush(t, w, Events("8", 0, 9))
	h.InterruptCommit(harnessT(t), s)
	if err := w.Write(ctx(t), Events("8", 10, 19)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if wm, err := w.Flush(ctx(t)); err == nil {
		t.Fatalf("Flush after InterruptCommit succeeded (watermark %s); the hook must make it fail between data and watermark", fmtWatermark(wm))
	}
	// A dead process never closes its writer; closing it here only frees
	// it, as Close abandons what was not committed.
	if err := w.Close(ctx(t)); err != nil {
		t.Logf("closing the interrupted writer: %v", err)
	}

	w, wm := open(t, newSink(t, h), "8")
	if wm == nil || wm.SequenceNumber < 9 {
		t.Fatalf("watermark after the crash %s, want at least seq 9", fmtWatermark(wm))
	}
	replay := Events("8", 10, 29)
	for len(replay) > 0 {
		n := min(6, len(replay))
		if batch := dedupe.After(replay[:n], wm); len(batch) > 0 {
			wm = writeFlush(t, w, batch)
		}
		replay = replay[n:]
	}
	closeWriter(t, w)
	wantWatermark(t, wm, 29)
	wantOnceInOrder(t, h, "8", 0, 29)
}

// caseDeadLetterReplay is how `ehsink deadletters replay` writes a letter
// into a sink that does not mark letters itself: through a writer of the
// letter's own partition, "deadletter.<partition>.<seq>", whose watermark
// is the mark that it was replayed. A replay killed before its commit
// leaves no mark and nothing written; the next one writes the event once;
// the mark outlives a restart; the event's partition keeps its watermark.
func caseDeadLetterReplay(t testing.TB, h Harness) {
	t.Helper()
	const why = "(ehsink deadletters replay writes each letter through a writer of a partition named " +
		"deadletter.<partition>.<sequence number>, whose watermark marks it replayed: " +
		"the sink must take any partition ID and keep its watermark as for a partition of the hub)"
	s := newSink(t, h)
	w, _ := open(t, s, "4")
	writeFlush(t, w, slices.Concat(Events("4", 0, 4), Events("4", 6, 9))) // 5 was dead-lettered
	closeWriter(t, w)

	p := deadletters.ReplayPartition("4", 5)
	reopen := func(s sinks.Sink) (sinks.Writer, *sinks.Position) {
		t.Helper()
		w, wm, err := s.Open(ctx(t), p)
		if err != nil {
			t.Fatalf("Open(%q): %v %s", p, err, why)
		}
		return w, wm
	}
	w, wm := reopen(s)
	if wm != nil {
		t.Fatalf("Open(%q) of a fresh replay partition reports watermark %s, want none %s", p, fmtWatermark(wm), why)
	}
	if err := w.Write(ctx(t), []sinks.Event{Event("4", 5)}); err != nil {
		t.Fatalf("Write of the letter's event to %q: %v", p, err)
	}
	closeWriter(t, w) // the replay killed before its commit

	w, wm = reopen(newSink(t, h))
	if wm != nil {
		t.Fatalf("after a replay closed without Flush, Open(%q) reports watermark %s, want none: nothing was committed %s", p, fmtWatermark(wm), why)
	}
	mark := writeFlush(t, w, []sinks.Event{Event("4", 5)})
	closeWriter(t, w)
	if mark == nil {
		t.Fatalf("Flush of %q reported no watermark: nothing would mark the letter replayed %s", p, why)
	}

	restarted := newSink(t, h)
	w, wm = reopen(restarted)
	closeWriter(t, w)
	if wm == nil {
		t.Fatalf("after a restart, Open(%q) reports no watermark: a second replay would write the letter again %s", p, why)
	}
	w, wm = open(t, restarted, "4")
	closeWriter(t, w)
	wantWatermark(t, wm, 9)
	held := slices.Concat(h.Committed(harnessT(t), "4"), h.Committed(harnessT(t), p))
	if n := len(slices.DeleteFunc(slices.Clone(held), func(s int64) bool { return s != 5 })); n != 1 {
		t.Fatalf("partitions 4 and %s hold the replayed event %d times, want once (they hold %s)", p, n, summarize(held))
	}
	if got := slices.DeleteFunc(h.Committed(harnessT(t), "4"), func(s int64) bool { return s == 5 }); !slices.Equal(got, slices.Concat(seqRange(0, 4), seqRange(6, 9))) {
		t.Fatalf("partition 4 holds %s besides the replayed event, want 0..4 and 6..9", summarize(got))
	}
}

// seqRange returns from..to.
func seqRange(from, to int64) []int64 {
	out := make([]int64, 0, to-from+1)
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}
