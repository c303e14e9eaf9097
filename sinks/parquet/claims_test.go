package parquet

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// claimCount returns how many claims the sink's store holds.
func claimCount(t testing.TB, s *sink) int {
	t.Helper()
	objs, err := s.store.list(context.Background(), claimsRoot+"/")
	if err != nil {
		t.Fatal(err)
	}
	return len(objs)
}

// TestClaimsStayBounded commits 30 times through one writer, then 10 more
// times through a writer of a new Open: one claim is left, the newest
// commit's, whatever the number of commits.
func TestClaimsStayBounded(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, nil)
		events := sinktest.Events("0", 0, 399)
		w, _ := open(t, s, "0")
		for i := 0; i < 300; i += 10 {
			writeAll(t, w, events[i:i+10])
			flush(t, w)
			if n := claimCount(t, s); n != 1 {
				t.Fatalf("after commit %d: %d claims, want 1", i/10+1, n)
			}
		}
		w.Close(ctxT(t))
		w, wm := open(t, s, "0")
		defer w.Close(ctxT(t))
		replay(t, w, nil, wm, events)
		if n := claimCount(t, s); n != 1 {
			t.Fatalf("after a new Open and its commit: %d claims, want 1", n)
		}
		wantExactlyOnce(t, d, "0", 0, 399)
	})
}

// claimRemoveStore stands for crashes around the removal of claims: with
// skip, removing a claim does nothing (claims pile up as if every writer
// had died before removing its last one); otherwise the crashAt-th removal
// of a claim ends the calling goroutine, before the removal, as a crash
// would: nothing after it runs.
type claimRemoveStore struct {
	store
	skip    bool
	crashAt int
	n       int
}

func (c *claimRemoveStore) remove(ctx context.Context, name string) error {
	if strings.HasPrefix(name, claimsRoot+"/") {
		if c.skip {
			return nil
		}
		if c.n++; c.n == c.crashAt {
			runtime.Goexit()
		}
	}
	return c.store.remove(ctx, name)
}

// TestCrashDuringClaimCleanup leaves five claims of published commits,
// then crashes a writer at each removal of a claim in turn: the removals
// of Open's sweep, and those of two later commits. After each crash a new
// writer resumes from the last checkpoint and replays: every event is in
// the files once (nothing lost, nothing published twice), and one claim is
// left.
func TestCrashDuringClaimCleanup(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*sinkConfig)
		want func(t *testing.T, d destination, from, to int64)
	}{
		{"rows", withSnappy(nil), func(t *testing.T, d destination, from, to int64) { wantExactlyOnce(t, d, "0", from, to) }},
		{"routed", withSnappy(routed(t)), func(t *testing.T, d destination, from, to int64) { wantRouted(t, d, "0", from, to) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachDestination(t, func(t *testing.T, d destination) {
				events := sinktest.Events("0", 0, 69)
				crashes := 0
				for k := 1; ; k++ {
					if k > 20 {
						t.Fatal("no run without a crash")
					}
					round := freshLike(t, d)
					finished := crashCleanupAt(t, round, tc.edit, events, k)
					tc.want(t, round, 0, 69)
					if finished {
						break
					}
					crashes++
				}
				// 4 in Open's sweep, 1 per later commit (3: two, and the
				// replay's)
				if crashes < 6 {
					t.Fatalf("crashed at %d removals of claims, want at least 6", crashes)
				}
			})
		})
	}
}

// crashCleanupAt runs one round on d, which is empty: 5 commits whose
// claims stay, then a writer that crashes at its crashAt-th removal of a
// claim while it opens and commits 50..69, then a writer that resumes and
// replays 0..69. It reports whether the second writer finished.
func crashCleanupAt(t *testing.T, d destination, edit func(*sinkConfig), events []sinks.Event, crashAt int) bool {
	t.Helper()
	setup := newSink(t, d, edit)
	setup.wrapStore(func(st store) store { return &claimRemoveStore{store: st, skip: true} })
	w, _ := open(t, setup, "0")
	var cp *sinks.Position
	for i := 0; i < 50; i += 10 {
		writeAll(t, w, events[i:i+10])
		cp = flush(t, w)
	}
	w.Close(ctxT(t))
	if n := claimCount(t, setup); n != 5 {
		t.Fatalf("%d claims left by the setup, want 5", n)
	}

	victim := newSink(t, d, edit)
	victim.wrapStore(func(st store) store { return &claimRemoveStore{store: st, crashAt: crashAt} })
	done := make(chan struct{})
	var err error
	finished := false
	go func() {
		defer close(done)
		ctx := context.Background()
		var sw sinks.Writer
		if sw, _, err = victim.Open(ctx, "0"); err != nil {
			return
		}
		for i := 50; i < 70; i += 10 {
			if err = sw.Write(ctx, events[i:i+10]); err != nil {
				return
			}
			var pos *sinks.Position
			if pos, err = sw.Flush(ctx); err != nil {
				return
			}
			cp = pos // the checkpoint, after the commit
		}
		finished = true
	}()
	<-done
	if err != nil {
		t.Fatalf("crash at claim removal %d: %v", crashAt, err)
	}

	s := newSink(t, d, edit)
	w, wm := open(t, s, "0")
	defer w.Close(ctxT(t))
	replay(t, w, cp, wm, events)
	if n := claimCount(t, s); n != 1 {
		t.Fatalf("crash at claim removal %d: %d claims after the replay, want 1", crashAt, n)
	}
	return finished
}

// TestReclaimedClaimIsFenced: writer A looks at the committed files (its
// fence) and pauses; writer B commits 0..9 and 10..19, which removes the
// claim of 0..9; A wakes and claims the commit of 0..14 under the name B's
// first claim had, which is free again. A's look after its claim finds
// B's files: A is fenced, and each event is visible once.
func TestReclaimedClaimIsFenced(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		a, b := newSink(t, d, nil), newSink(t, d, nil)
		events := sinktest.Events("0", 0, 19)
		// B opens first: an Open removes the partition's temporary files,
		// which would fence A by taking its file away.
		wb, _ := open(t, b, "0")
		wa, _ := open(t, a, "0")
		writeAll(t, wa, events[:15])
		hook := &listHookStore{store: a.store}
		a.wrapStore(func(store) store { return hook })
		hook.after = func() {
			writeAll(t, wb, events[:10])
			flush(t, wb)
			writeAll(t, wb, events[10:])
			flush(t, wb)
			wb.Close(ctxT(t))
		}
		if _, err := wa.Flush(ctxT(t)); !errors.Is(err, sinks.ErrFenced) {
			t.Fatalf("A's Flush = %v, want sinks.ErrFenced", err)
		}
		wa.Close(ctxT(t))
		wantExactlyOnce(t, d, "0", 0, 19)
		if n := claimCount(t, b); n != 1 {
			t.Fatalf("%d claims, want 1 (B's newest; A withdrew its own)", n)
		}
	})
}

// freshLike returns a new, empty destination of d's kind.
func freshLike(t *testing.T, d destination) destination {
	t.Helper()
	if d.name == "blob" {
		return blobDestination(t)
	}
	return localDestination(t)
}

// BenchmarkLongRunClaims writes 300,000 events through 4 partitions (75,000
// each, in batches of 500, files rolling at 1,000 rows: 300 commits) and
// reports how many data files and claims are left: the claims stay at one
// per partition however long the run.
func BenchmarkLongRunClaims(b *testing.B) {
	const n, partitions = 300_000, 4
	for b.Loop() {
		files, claims := longRun(b, n, partitions)
		b.ReportMetric(float64(files), "data_files")
		b.ReportMetric(float64(claims), "claims")
		if claims > partitions {
			b.Fatalf("%d claims after %d data files, want at most one per partition (%d)", claims, files, partitions)
		}
	}
}

// longRun is one run of BenchmarkLongRunClaims; it returns the numbers of
// data files and claims left. (Its body sits outside the b.Loop loop: Go
// 1.26.8's compiler crashed on it inside.)
func longRun(b *testing.B, n, partitions int) (files, claims int) {
	ctx := context.Background()
	c := newConfig()
	c.Dir = b.TempDir()
	c.Columns = benchColumns(b)
	c.MaxRows = 1_000
	s, ws := openBenchWriters(b, c, partitions)
	batch := make([]sinks.Event, 500)
	next := make([]int64, partitions)
	for done := 0; done < n; done += len(batch) {
		p := (done / len(batch)) % partitions
		for i := range batch {
			fillEvent(&batch[i], strconv.Itoa(p), next[p])
			next[p]++
		}
		if err := ws[p].Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if ws[p].(sinks.Batcher).FlushDue(time.Now()) {
			if _, err := ws[p].Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, w := range ws {
		if _, err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	objs, err := s.store.list(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case strings.HasPrefix(o.name, claimsRoot+"/"):
			claims++
		case strings.HasSuffix(o.name, ".parquet"):
			files++
		}
	}
	return files, claims
}

// TestOpenDuringClaimFences: another writer opens the partition while this
// one is between creating its claim's temporary file and linking it (the
// Open removes the temporary files of abandoned writers, this one's
// included). The claim must fail as a lost partition (sinks.ErrFenced),
// which the runner hands back, not as a failure that stops the connector;
// the new owner then commits every event once.
func TestOpenDuringClaimFences(t *testing.T) {
	d := localDestination(t)
	a, b := newSink(t, d, nil), newSink(t, d, nil)
	events := sinktest.Events("0", 0, 19)
	wa, _ := open(t, a, "0")
	writeAll(t, wa, events[:10])
	var wb *writer
	a.traceSteps(func(step, _ string) {
		if step == "claim" && wb == nil {
			wb, _ = open(t, b, "0")
		}
	})
	if _, err := wa.Flush(ctxT(t)); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("A's Flush = %v, want sinks.ErrFenced", err)
	}
	wa.Close(ctxT(t))
	if wb == nil {
		t.Fatal("the claim step was never reached")
	}
	writeAll(t, wb, events)
	flush(t, wb)
	wb.Close(ctxT(t))
	wantExactlyOnce(t, d, "0", 0, 19)
}
