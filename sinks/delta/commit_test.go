package delta

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedAzurite()
	if code == 0 {
		// Idle keep-alive connections of the Blob client are the
		// transport's, not leaks of the sink.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// wantOnce fails unless partition p holds seq from..to, each once, in
// order, as a reader replaying the log sees it.
func wantOnce(t *testing.T, dir, p string, from, to int64) {
	t.Helper()
	got := seqsOf(readRows(t, dir))[p]
	var want []int64
	for s := from; s <= to; s++ {
		want = append(want, s)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("partition %s holds %v, want %d..%d once each", p, got, from, to)
	}
}

func writeFlush(t *testing.T, w sinks.Writer, evs []sinks.Event) *sinks.Position {
	t.Helper()
	if err := w.Write(testCtx(t), evs); err != nil {
		t.Fatalf("Write: %v", err)
	}
	pos, err := w.Flush(testCtx(t))
	if err != nil {
		t.Fatalf("Flush: %v", err)
	}
	return pos
}

// TestCrashAtEachStep stops a flush at each step of its commit, as a
// process killed there, starts a new sink on the table and replays from
// the watermark it reports: every row is in the table once.
func TestCrashAtEachStep(t *testing.T) {
	// Version 0 creates the table, 1 and 2 are the flushes: a checkpoint
	// every 2 versions makes the second flush write one.
	every2 := func(c *sinkConfig) { c.CheckpointInterval = 2 }
	for _, step := range []string{stepDataWritten, stepCommitted, stepCheckpointed} {
		t.Run(step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			s := newTestSink(t, dir, every2)
			w, _, err := s.Open(testCtx(t), "0")
			if err != nil {
				t.Fatal(err)
			}
			writeFlush(t, w, sinktest.Events("0", 0, 9))
			s.setHook(func(st string) error {
				if st == step {
					return errors.New("killed")
				}
				return nil
			})
			if err := w.Write(testCtx(t), sinktest.Events("0", 10, 19)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(testCtx(t)); err == nil {
				t.Fatal("Flush with a kill at " + step + " succeeded")
			}
			if step == stepCheckpointed {
				// Killed between the checkpoint and _last_checkpoint: the
				// next start finds the checkpoint by listing the log.
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(deltalog.CheckpointName(2)))); err != nil {
					t.Fatalf("checkpoint 2: %v", err)
				}
				if _, err := os.Stat(filepath.Join(dir, "_delta_log", "_last_checkpoint")); !os.IsNotExist(err) {
					t.Fatalf("_last_checkpoint after a kill before it: %v", err)
				}
			}
			// The dead process never closes its writer; its files stay.
			w2, wm, err := newTestSink(t, dir, every2).Open(testCtx(t), "0")
			if err != nil {
				t.Fatal(err)
			}
			wantSeq := int64(9)
			if step != stepDataWritten {
				wantSeq = 19
			}
			if wm == nil || wm.SequenceNumber != wantSeq {
				t.Fatalf("watermark after a kill at %s: %v, want seq %d", step, wm, wantSeq)
			}
			if batch := dedupe.After(sinktest.Events("0", 10, 29), wm); len(batch) > 0 {
				writeFlush(t, w2, batch)
			}
			wantOnce(t, dir, "0", 0, 29)
			if step == stepDataWritten {
				files, _ := logAdds(t, dir)
				if n := len(dataFiles(t, dir)); n != len(files)+1 {
					t.Fatalf("%d data files for %d in the log; want the killed flush's one left unreferenced", n, len(files))
				}
			}
		})
	}
}

// TestRacingWriters has two sinks (two processes) commit to one table at
// once, each for its own partitions: they race for versions, every
// commit lands once, at contiguous versions.
func TestRacingWriters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	raceFlushes(t, []*sink{newTestSink(t, dir, nil), newTestSink(t, dir, nil)}, 100)
	for _, p := range []string{"0", "1", "2", "3"} {
		wantOnce(t, dir, p, 0, 99)
	}
	_, txns := logAdds(t, dir)
	for _, p := range []string{"0", "1", "2", "3"} {
		if v := txns[appID(testInfo, p)]; v != 99 {
			t.Errorf("txn of partition %s: %d, want 99", p, v)
		}
	}
}

// TestStaleOwnerFenced has two owners of one partition flush from the same
// watermark at once: one commits, the other is fenced and removes its
// files.
func TestStaleOwnerFenced(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	a, b := newTestSink(t, dir, nil), newTestSink(t, dir, nil)
	wa, _, _ := a.Open(testCtx(t), "0")
	wb, _, _ := b.Open(testCtx(t), "0")
	writeFlush(t, wa, sinktest.Events("0", 0, 9))
	if err := wb.Write(testCtx(t), sinktest.Events("0", 0, 14)); err != nil {
		t.Fatal(err)
	}
	if _, err := wb.Flush(testCtx(t)); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("stale owner's Flush: %v, want ErrFenced", err)
	}
	wantOnce(t, dir, "0", 0, 9)
	files, _ := logAdds(t, dir)
	if n := len(dataFiles(t, dir)); n != len(files) {
		t.Fatalf("%d data files, %d in the log: the fenced writer left its files", n, len(files))
	}
}

// TestCheckpoints commits past two checkpoints, removes the commits the
// last checkpoint covers (as log cleanup may), and opens the table again:
// the checkpoint alone carries the files and every partition's txn.
func TestCheckpoints(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, func(c *sinkConfig) { c.CheckpointInterval = 3 })
	w0, _, _ := s.Open(testCtx(t), "0")
	w1, _, _ := s.Open(testCtx(t), "1")
	for i := int64(0); i < 4; i++ {
		writeFlush(t, w0, sinktest.Events("0", i*5, i*5+4))
		writeFlush(t, w1, sinktest.Events("1", i*5, i*5+4))
	}
	// Version 0 created the table; 8 commits followed: checkpoints at 3 and 6.
	for _, v := range []int64{3, 6} {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(deltalog.CheckpointName(v)))); err != nil {
			t.Fatalf("checkpoint %d: %v", v, err)
		}
	}
	lc, err := os.ReadFile(filepath.Join(dir, "_delta_log", "_last_checkpoint"))
	if err != nil || !strings.Contains(string(lc), `"version":6`) {
		t.Fatalf("_last_checkpoint: %s, %v; want version 6", lc, err)
	}
	rowsBefore := readRows(t, dir)
	for v := int64(0); v <= 6; v++ {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(deltalog.CommitName(v)))); err != nil {
			t.Fatal(err)
		}
	}
	s2 := newTestSink(t, dir, nil)
	for p, want := range map[string]int64{"0": 19, "1": 19} {
		_, wm, err := s2.Open(testCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if wm == nil || wm.SequenceNumber != want {
			t.Fatalf("partition %s: watermark %v from the checkpoint, want seq %d", p, wm, want)
		}
	}
	snap := s2.current()
	if len(snap.Files) != 8 || snap.Version != 8 {
		t.Fatalf("snapshot from the checkpoint: version %d, %d files; want 8 and 8", snap.Version, len(snap.Files))
	}
	if len(rowsBefore) != 40 {
		t.Fatalf("%d rows before, want 40", len(rowsBefore))
	}
}

// TestGroupedCommits: the flushes of four partitions that wait for the
// table while a commit is in progress are made in one version, with a
// txn for each partition.
func TestGroupedCommits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	queued := make(chan struct{}, 4)
	s.queued = func() { queued <- struct{}{} }
	parts := []string{"0", "1", "2", "3"}
	var ws []sinks.Writer
	for _, p := range parts {
		w, _, err := s.Open(testCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(testCtx(t), sinktest.Events(p, 0, 9)); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	// The commit in progress: the test holds the turn until every flush
	// is queued.
	s.mu.Lock()
	var wg sync.WaitGroup
	errs := make([]error, len(ws))
	for i, w := range ws {
		wg.Go(func() { _, errs[i] = w.Flush(context.Background()) })
	}
	for range ws {
		<-queued
	}
	s.mu.Unlock()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("partition %s: %v", parts[i], err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
	if len(names) != 2 {
		t.Fatalf("%d versions, want 2 (the table's creation and one commit of the four flushes)", len(names))
	}
	_, txns := logAdds(t, dir)
	for _, p := range parts {
		if txns[appID(testInfo, p)] != 9 {
			t.Errorf("partition %s: txn %d, want 9", p, txns[appID(testInfo, p)])
		}
		wantOnce(t, dir, p, 0, 9)
	}
}

// TestLogCleanup: with delta.logRetentionDuration of 0, each checkpoint
// lets the entries before it go; a table that does not set it keeps them
// (30 days). The cleaned table opens from its checkpoint with every
// partition's txn and file.
func TestLogCleanup(t *testing.T) {
	for _, tc := range []struct {
		name      string
		props     map[string]string
		wantFirst int64 // the oldest commit file left
	}{
		{"retention 0", map[string]string{"delta.logRetentionDuration": "interval 0 seconds"}, 6},
		{"default retention", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			edit := func(c *sinkConfig) { c.CheckpointInterval, c.Properties = 3, tc.props }
			s := newTestSink(t, dir, edit)
			w, _, _ := s.Open(testCtx(t), "0")
			for i := int64(0); i < 8; i++ {
				writeFlush(t, w, sinktest.Events("0", i*5, i*5+4))
			}
			names, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.json"))
			if len(names) == 0 || filepath.Base(names[0]) != fmt.Sprintf("%020d.json", tc.wantFirst) {
				t.Fatalf("oldest commit file %v, want version %d", names, tc.wantFirst)
			}
			cps, _ := filepath.Glob(filepath.Join(dir, "_delta_log", "*.checkpoint.parquet"))
			if tc.wantFirst > 0 && len(cps) != 1 {
				t.Fatalf("checkpoints %v, want the one at 6", cps)
			}
			_, wm, err := newTestSink(t, dir, edit).Open(testCtx(t), "0")
			if err != nil || wm == nil || wm.SequenceNumber != 39 {
				t.Fatalf("reopened: watermark %v, %v; want seq 39", wm, err)
			}
			snap, err := deltalog.New(mustLocal(t, dir)).Load(testCtx(t))
			if err != nil || len(snap.Files) != 8 {
				t.Fatalf("loaded %v files, %v; want 8", len(snap.Files), err)
			}
		})
	}
}

// TestVacuumRemovesOrphans: the data file of a flush killed before its
// commit is removed when a sink starts after orphan_age; files a commit
// took, and files of other writers, stay.
func TestVacuumRemovesOrphans(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	w, _, _ := s.Open(testCtx(t), "0")
	writeFlush(t, w, sinktest.Events("0", 0, 9))
	s.setHook(func(st string) error {
		if st == stepDataWritten {
			return errors.New("killed")
		}
		return nil
	})
	if err := w.Write(testCtx(t), sinktest.Events("0", 10, 19)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(testCtx(t)); err == nil {
		t.Fatal("Flush with a kill succeeded")
	}
	foreign := filepath.Join(dir, "part-00000-0b5c1c2e-spark-c000.snappy.parquet")
	if err := os.WriteFile(foreign, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	if n := len(dataFiles(t, dir)); n != 3 {
		t.Fatalf("%d data files before, want 3 (committed, orphan, foreign)", n)
	}
	newTestSink(t, dir, nil) // orphan_age 1h: the orphan may be a commit in flight
	if n := len(dataFiles(t, dir)); n != 3 {
		t.Fatalf("%d data files after a start within orphan_age, want 3", n)
	}
	newTestSink(t, dir, func(c *sinkConfig) { c.OrphanAge = time.Nanosecond })
	files, _ := logAdds(t, dir)
	got := dataFiles(t, dir)
	if len(got) != 2 || !slices.Contains(got, files[0]) || !slices.Contains(got, filepath.Base(foreign)) {
		t.Fatalf("data files after vacuum %v, want the committed %s and the foreign one", got, files[0])
	}
	wantOnce(t, dir, "0", 0, 9)
}

// raceFlushes has the sinks (processes) commit partitions 0 to 3 at once,
// each partition by one of them, in flushes of 10 events up to seq n-1.
func raceFlushes(t *testing.T, sinksOf []*sink, n int64) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i, p := range []string{"0", "1", "2", "3"} {
		s := sinksOf[i%len(sinksOf)]
		wg.Go(func() {
			w, _, err := s.Open(context.Background(), p)
			if err != nil {
				errs <- err
				return
			}
			defer w.Close(context.Background())
			for from := int64(0); from < n; from += 10 {
				if err := w.Write(context.Background(), sinktest.Events(p, from, from+9)); err != nil {
					errs <- err
					return
				}
				if _, err := w.Flush(context.Background()); err != nil {
					errs <- fmt.Errorf("partition %s: %w", p, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestWatermarkCarriesTheOffset: a partition's watermark read back at Open
// has the offset of its last committed event, so that the runner can
// checkpoint a partition claimed after a commit nobody checkpointed, with
// no event to come (a checkpoint needs the offset).
func TestWatermarkCarriesTheOffset(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	w, _, err := newTestSink(t, dir, nil).Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	events := sinktest.Events("0", 0, 9)
	writeFlush(t, w, events)
	_, wm, err := newTestSink(t, dir, nil).Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	if want := events[len(events)-1]; wm == nil || wm.SequenceNumber != want.SequenceNumber || wm.Offset != want.Offset {
		t.Fatalf("watermark at open %+v, want sequence number %d and offset %q", wm, want.SequenceNumber, want.Offset)
	}
}

// TestFlushWaitingForTheTurnIsBounded: a flush whose turn is held (by a
// commit that hangs on an unreachable store) ends when its own call does
// instead of waiting for the holder, and commits once at the retry after
// the turn is free.
func TestFlushWaitingForTheTurnIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	w, _, err := s.Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testCtx(t), sinktest.Events("0", 0, 9)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := w.Flush(ctx); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a stall bound, not a measurement
		s.mu.Unlock()
		t.Fatal("the flush waited for the held turn past its own context")
	}
	s.mu.Unlock()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush while the turn was held = %v, want the context's deadline", err)
	}
	if _, err := w.Flush(testCtx(t)); err != nil {
		t.Fatalf("Flush after the turn was freed: %v", err)
	}
	wantOnce(t, dir, "0", 0, 9)
}
