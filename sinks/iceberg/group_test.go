package iceberg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestCommitsComeTogether: the flushes of four partitions that wait for
// the table at the same time are made as one snapshot, carrying each
// partition's watermark, and every row is in the table once.
func TestCommitsComeTogether(t *testing.T) {
	l := newLake(t)
	s := l.newSink(t, nil)
	parts := []string{"0", "1", "2", "3"}
	before := len(l.loadTable(t).Metadata().Snapshots())
	for i, err := range flushTogether(t, s, openWritten(t, s, parts...)) {
		if err != nil {
			t.Fatalf("partition %s: Flush: %v", parts[i], err)
		}
	}

	tbl := l.loadTable(t)
	if got := len(tbl.Metadata().Snapshots()) - before; got != 1 {
		t.Errorf("%d snapshots for 4 flushes that waited together, want 1", got)
	}
	snap := tbl.CurrentSnapshot()
	for _, p := range parts {
		if v, want := snap.Summary.Properties[watermarkKey(testInfo, p)], fmt.Sprintf("49,%d", 49*1000); v != want {
			t.Errorf("current snapshot's watermark of partition %s: %q, want %q", p, v, want)
		}
	}
	if got, want := l.scanSeqs(t), firstSeqs(50, parts...); !equalSeqs(got, want) {
		t.Fatalf("the table holds %v rows, want %v", counts(got), counts(want))
	}
}

// TestStaleOwnerFencedAloneInAGroup: a stale owner's commit that waits
// with others is refused alone; the others commit.
func TestStaleOwnerFencedAloneInAGroup(t *testing.T) {
	l := newLake(t)
	s := l.newSink(t, nil)
	ctx := context.Background()
	ws := openWritten(t, s, "0", "1", "2")
	// partition 2's new owner commits first: the writer in ws is stale
	owner := openWritten(t, s, "2")[0]
	if _, err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	errs := flushTogether(t, s, ws)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("partitions 0 and 1: %v, %v", errs[0], errs[1])
	}
	if !errors.Is(errs[2], sinks.ErrFenced) {
		t.Fatalf("the stale owner of partition 2: %v, want ErrFenced", errs[2])
	}
	if got, want := l.scanSeqs(t), firstSeqs(50, "0", "1", "2"); !equalSeqs(got, want) {
		t.Fatalf("the table holds %v rows, want %v", counts(got), counts(want))
	}
}

// TestTwoWritersOfAPartitionInAGroup: a stale writer of a partition and
// the new owner's, in one process, both fenced on the same watermark,
// queue for the table together: one commits, the other is refused as if
// they had taken turns, and the partition's rows are in the table once.
func TestTwoWritersOfAPartitionInAGroup(t *testing.T) {
	l := newLake(t)
	s := l.newSink(t, nil)
	ws := openWritten(t, s, "0", "2", "2")
	errs := flushTogether(t, s, ws)
	if errs[0] != nil {
		t.Fatalf("partition 0: %v", errs[0])
	}
	fenced := 0
	for _, err := range errs[1:] {
		switch {
		case errors.Is(err, sinks.ErrFenced):
			fenced++
		case err != nil:
			t.Fatalf("a writer of partition 2: %v", err)
		}
	}
	if fenced != 1 {
		t.Errorf("%d of the two writers of partition 2 fenced, want 1", fenced)
	}
	if got, want := l.scanSeqs(t), firstSeqs(50, "0", "2"); !equalSeqs(got, want) {
		t.Fatalf("the table holds %v rows, want %v", counts(got), counts(want))
	}
}

// openWritten opens a writer per partition and writes it events 0..49.
func openWritten(t *testing.T, s *sink, parts ...string) []sinks.Writer {
	t.Helper()
	ctx := context.Background()
	var ws []sinks.Writer
	for _, p := range parts {
		w, _, err := s.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(ctx) })
		if err := w.Write(ctx, sinktest.Events(p, 0, 49)); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

// flushTogether flushes ws so that their commits wait for the table at
// the same time: each flush, its data files written, waits until all
// have written theirs; the test then holds the table's mutex, as a commit
// in progress would, until every commit is queued. It returns each
// Flush's error.
func flushTogether(t *testing.T, s *sink, ws []sinks.Writer) []error {
	t.Helper()
	d := s.dests[0]
	arrived, release := make(chan struct{}, len(ws)), make(chan struct{})
	s.setHook(func(step string) error {
		if step == stepDataWritten {
			arrived <- struct{}{}
			<-release
		}
		return nil
	})
	defer s.setHook(nil)
	errs := make([]error, len(ws))
	done := make(chan struct{}, len(ws))
	for i, w := range ws {
		go func() {
			_, errs[i] = w.Flush(context.Background())
			done <- struct{}{}
		}()
	}
	for range ws {
		<-arrived
	}
	d.mu.Lock()
	close(release)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) { // a stall bound, not a measurement
		d.qmu.Lock()
		n := len(d.queued)
		d.qmu.Unlock()
		if n == len(ws) {
			break
		}
		if time.Now().After(deadline) {
			d.mu.Unlock()
			t.Fatalf("%d of %d commits queued", n, len(ws))
		}
	}
	d.mu.Unlock()
	for range ws {
		<-done
	}
	return errs
}

// firstSeqs is sequence numbers 0..n-1 of each partition.
func firstSeqs(n int64, parts ...string) map[string][]int64 {
	want := map[string][]int64{}
	for _, p := range parts {
		for seq := range n {
			want[p] = append(want[p], seq)
		}
	}
	return want
}

// BenchmarkCommitsOverASlowCatalog: eight partitions of one replica flush
// 100 events at a time, together, into one table behind a REST catalog
// that takes 20 ms to apply a commit (a remote catalog's round trip and
// work), each commit made alone (the writers taking turns, as before
// commits were grouped) and grouped. It reports the catalog's commits per
// flush and the events committed per second.
func BenchmarkCommitsOverASlowCatalog(b *testing.B) {
	const partitions, perFlush = 8, 100
	for _, mode := range []struct {
		name string
		solo bool
	}{{"alone", true}, {"grouped", false}} {
		b.Run(mode.name, func(b *testing.B) {
			l, rc := restLake(b)
			rc.commitDelay = 20 * time.Millisecond
			s := l.newSink(b, nil)
			s.soloCommits = mode.solo
			ctx := context.Background()
			ws := make([]sinks.Writer, partitions)
			for i := range ws {
				w, _, err := s.Open(ctx, fmt.Sprint(i))
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close(ctx)
				ws[i] = w
			}
			commits0 := rc.commits.Load()
			flushes := 0
			for from := int64(0); b.Loop(); from += perFlush {
				var wg sync.WaitGroup
				for i, w := range ws {
					wg.Go(func() {
						p := fmt.Sprint(i)
						if err := w.Write(ctx, sinktest.Events(p, from, from+perFlush-1)); err != nil {
							b.Error(err)
							return
						}
						if _, err := w.Flush(ctx); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				flushes += partitions
			}
			b.ReportMetric(float64(rc.commits.Load()-commits0)/float64(flushes), "commits/flush")
			b.ReportMetric(float64(flushes*perFlush)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestFlushWaitingForTheTurnIsBounded: a flush whose table's turn is held
// (by a commit or maintenance that hangs on an unreachable catalog) writes
// its data files all the same, ends when its own call does instead of
// waiting for the holder, and commits once at the retry after the turn is
// free: the partition's rows are in the table once.
func TestFlushWaitingForTheTurnIsBounded(t *testing.T) {
	l := newLake(t)
	s := l.newSink(t, nil)
	w := openWritten(t, s, "0")[0]
	written := make(chan struct{}, 4)
	s.setHook(func(step string) error {
		if step == stepDataWritten {
			written <- struct{}{}
		}
		return nil
	})
	d := s.dests[0]
	d.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := w.Flush(ctx); done <- err }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a stall bound, not a measurement
		d.mu.Unlock()
		t.Fatal("the flush waited for the held turn past its own context")
	}
	d.mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the turn was held = %v, want the context's deadline", err)
	}
	select {
	case <-written:
	default:
		t.Fatal("the flush did not write its data files while the turn was held")
	}
	if _, err := w.Flush(context.Background()); err != nil {
		t.Fatalf("Flush after the turn was freed: %v", err)
	}
	if got, want := l.scanSeqs(t), firstSeqs(50, "0"); !equalSeqs(got, want) {
		t.Fatalf("the table holds %v rows, want %v", counts(got), counts(want))
	}
}
