package iceberg

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// compacting turns compaction on, at a target far above the test's files,
// with maintenance once a minute of the sink's clock.
func compacting(c *sinkConfig) {
	c.Maintenance = maintenanceConfig{Every: time.Minute, Compact: true, CompactTargetSize: config.MiB,
		KeepSnapshots: 100, MaxSnapshotAge: time.Hour, OrphanAge: time.Hour}
}

// flushTen writes seq from..from+9 to w and flushes.
func flushTen(t *testing.T, w sinks.Writer, partition string, from int64) {
	t.Helper()
	ctx := context.Background()
	if err := w.Write(ctx, sinktest.Events(partition, from, from+9)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// dataFiles counts the data files of the table's current snapshot.
func (l *lake) dataFiles(t *testing.T) int {
	t.Helper()
	tasks, err := l.loadTable(t).Scan().PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(tasks)
}

// TestCompactionKeepsRowsAndWatermarks: twelve small commits of two
// partitions are rewritten into a few files; every row is there once, and
// a new owner of each partition resumes where it stopped (the compaction's
// snapshot carries the watermarks).
func TestCompactionKeepsRowsAndWatermarks(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, compacting)
	clock := time.Now()
	s.setClock(func() time.Time { return clock })
	writers := map[string]sinks.Writer{}
	for _, p := range []string{"0", "1"} {
		w, _, err := s.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		writers[p] = w
	}
	for i := range int64(6) {
		flushTen(t, writers["0"], "0", i*10)
		flushTen(t, writers["1"], "1", i*10)
	}
	before := l.dataFiles(t)
	clock = clock.Add(2 * time.Minute)
	flushTen(t, writers["0"], "0", 60) // its maintenance compacts
	after := l.dataFiles(t)
	t.Logf("data files of the current snapshot: %d before the compaction, %d after", before, after)
	if before < 12 || after >= before/2 {
		t.Fatalf("data files %d before, %d after: want the small files rewritten", before, after)
	}
	// The compaction's snapshot carries every watermark itself: once
	// expiry removes the snapshots before it, no ancestor holds them.
	snap := l.loadTable(t).CurrentSnapshot()
	for p, last := range map[string]int64{"0": 69, "1": 59} {
		if v := snap.Summary.Properties[watermarkKey(testInfo, p)]; v != fmt.Sprintf("%d,%d", last, last*1000) {
			t.Errorf("the compaction's snapshot (%s) holds partition %s's watermark %q, want seq %d", snap.Summary.Operation, p, v, last)
		}
	}
	seqs := l.scanSeqs(t)
	for p, last := range map[string]int64{"0": 69, "1": 59} {
		want := make([]int64, last+1)
		for i := range want {
			want[i] = int64(i)
		}
		if !slices.Equal(seqs[p], want) {
			t.Errorf("partition %s holds %v, want 0..%d once", p, seqs[p], last)
		}
		_, wm, err := l.newSink(t, nil).Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if wm == nil || wm.SequenceNumber != last {
			t.Errorf("partition %s resumes after %v, want %d", p, wm, last)
		}
	}
}

// TestCompactionLosesToACommit: another process commits a partition
// between a compaction's plan and its commit. The compaction must not
// land with the watermarks it read before that commit (the partition
// would then resume before what it committed, and write it twice): it
// fails, and the partition resumes after the other process's commit.
func TestCompactionLosesToACommit(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, compacting)
	clock := time.Now()
	s.setClock(func() time.Time { return clock })
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	for i := range int64(6) {
		flushTen(t, w, "0", i*10)
	}
	other := l.newSink(t, nil)
	ow, _, err := other.Open(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	defer ow.Close(ctx)
	committed := false
	s.setHook(func(step string) error {
		if step == stepCompactionPlanned && !committed {
			committed = true
			flushTen(t, ow, "1", 0)
		}
		return nil
	})
	clock = clock.Add(2 * time.Minute)
	flushTen(t, w, "0", 60)
	if !committed {
		t.Fatal("the compaction never reached its commit: the test tests nothing")
	}
	_, wm, err := l.newSink(t, nil).Open(ctx, "1")
	if err != nil {
		t.Fatal(err)
	}
	if wm == nil || wm.SequenceNumber != 9 {
		t.Fatalf("partition 1 resumes after %v, want 9 (the commit made during the compaction)", wm)
	}
	if got := l.scanSeqs(t)["1"]; len(got) != 10 {
		t.Fatalf("partition 1 holds %v, want 0..9", got)
	}
}
