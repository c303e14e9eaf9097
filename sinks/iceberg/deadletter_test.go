package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// badEvents are the kit's events from..to, with the body of seqs 3 and 7
// (and every tenth after them) one that does not map.
func badEvents(from, to int64) []sinks.Event {
	evs := sinktest.Events("0", from, to)
	for i := range evs {
		if s := evs[i].SequenceNumber % 10; s == 3 || s == 7 {
			evs[i].Body = []byte(`{"id":"bad","seq":1,"customer":"c","amount":"not a number","ts":"2026-01-02T03:04:05Z"}`)
		}
	}
	return evs
}

// writeWithLetters writes evs to w and dead-letters the events Write
// reports, as the runner does.
func writeWithLetters(t *testing.T, w sinks.Writer, evs []sinks.Event) {
	t.Helper()
	ctx := context.Background()
	err := w.Write(ctx, evs)
	var be *sinks.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Write: %v, want the bad events reported", err)
	}
	var letters []sinks.DeadLetter
	for _, f := range be.Failed {
		letters = append(letters, sinks.DeadLetter{Event: evs[f.Index], Reason: f.Err.Error(), FailedAt: time.Now()})
	}
	if err := w.(sinks.DeadLetterer).DeadLetter(ctx, letters); err != nil {
		t.Fatal(err)
	}
}

// deadLetterRows reads the dead-letter table back with iceberg-go's scan:
// "partition/seq" of each row, sorted, and the rows' records.
func (l *lake) deadLetterRows(t *testing.T, name string) ([]string, []string) {
	t.Helper()
	tbl := l.loadNamed(t, name)
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields("partition", "sequence_number", "reason", "record")).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var keys, records []string
	for rec, err := range itr {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		col := func(n string) int { return rec.Schema().FieldIndices(n)[0] }
		parts := rec.Column(col("partition")).(*array.String)
		seqs := rec.Column(col("sequence_number")).(*array.Int64)
		reasons := rec.Column(col("reason")).(*array.String)
		recs := rec.Column(col("record")).(*array.String)
		for i := range int(rec.NumRows()) {
			if reasons.Value(i) == "" {
				t.Errorf("dead letter %s/%d has no reason", parts.Value(i), seqs.Value(i))
			}
			keys = append(keys, fmt.Sprintf("%s/%d", parts.Value(i), seqs.Value(i)))
			records = append(records, recs.Value(i))
		}
		rec.Release()
	}
	slices.Sort(keys)
	return keys, records
}

// TestDeadLettersCommittedOnce: the letters of a flush are committed to
// the dead-letter table before the data, carrying the partition's
// watermark there. A flush that fails after the letters' commit (and
// before the data's) is replayed from the data table's watermark; the
// replay's letters are skipped, so each is stored once, and the data is
// written once.
func TestDeadLettersCommittedOnce(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, nil)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	writeWithLetters(t, w, badEvents(0, 9))
	swaps := 0
	s.setHook(func(step string) error {
		if step == stepAfterSwap {
			if swaps++; swaps == 1 {
				return nil // the dead letters' commit
			}
		}
		if step == stepBeforeSwap && swaps == 1 {
			return errors.New("injected: the process dies before the data's commit")
		}
		return nil
	})
	if _, err := w.Flush(ctx); err == nil {
		t.Fatal("Flush passed the injected failure")
	}
	if got, _ := l.deadLetterRows(t, "orders_dead_letters"); !slices.Equal(got, []string{"0/3", "0/7"}) {
		t.Fatalf("after the failed flush the dead-letter table holds %v, want [0/3 0/7]: the letters commit first", got)
	}

	s = l.newSink(t, nil)
	w, wm, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if wm != nil {
		t.Fatalf("watermark %v, want none: the data was never committed", wm)
	}
	writeWithLetters(t, w, badEvents(0, 9))
	writeWithLetters(t, w, badEvents(10, 19))
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	keys, records := l.deadLetterRows(t, "orders_dead_letters")
	if want := []string{"0/13", "0/17", "0/3", "0/7"}; !slices.Equal(keys, want) {
		t.Errorf("dead-letter table holds %v, want %v (each once)", keys, want)
	}
	for _, r := range records {
		var rec struct {
			SequenceNumber int64           `json:"sequence_number"`
			Body           json.RawMessage `json:"body"`
			Reason         string          `json:"reason"`
		}
		if err := json.Unmarshal([]byte(r), &rec); err != nil || !strings.Contains(string(rec.Body), "not a number") || rec.Reason == "" {
			t.Errorf("record %s: %v; want the letter's event body and reason", r, err)
		}
	}
	got := l.scanSeqs(t)["0"]
	var want []int64
	for seq := range int64(20) {
		if s := seq % 10; s != 3 && s != 7 {
			want = append(want, seq)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("orders holds %v, want %v", got, want)
	}
}

// TestFencedWritersDoNotDeadlock: a writer fenced on the dead-letter table
// drops its rows and files in every table, which takes each table's mutex.
// It must not hold the dead-letter table's mutex meanwhile: a writer of
// another partition fenced on the data table at the same moment holds
// that one's and waits for the dead-letter table's, and both partitions
// would hang for good, through the stop too (the chaos matrix's restarted
// replica had two such partitions, silent until its SIGTERM timed out).
// Here the test holds the data table's mutex, as that other writer would,
// and must get the dead-letter table's.
func TestFencedWritersDoNotDeadlock(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, nil)
	stale, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close(ctx)
	owner, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	for _, w := range []sinks.Writer{owner, stale} {
		writeWithLetters(t, w, badEvents(0, 9))
	}
	if _, err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	reached := make(chan struct{})
	var once sync.Once
	s.setHook(func(step string) error {
		if step == stepDataWritten { // the dead letters' files, before their commit
			once.Do(func() { close(reached) })
		}
		return nil
	})
	data := s.dests[0]
	data.mu.Lock()
	done := make(chan error, 1)
	go func() {
		_, err := stale.Flush(ctx)
		done <- err
	}()
	<-reached
	time.Sleep(200 * time.Millisecond) // the stale writer meets the fence and waits for the data table's mutex
	got := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got = s.dl.mu.TryLock(); got {
			s.dl.mu.Unlock()
			break
		}
	}
	data.mu.Unlock()
	if !got {
		t.Fatal("the fenced writer holds the dead-letter table's mutex while it waits for the data table's: two writers fenced at once deadlock")
	}
	if err := <-done; !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("the stale writer's Flush: %v, want ErrFenced", err)
	}
}
