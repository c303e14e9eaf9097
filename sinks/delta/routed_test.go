package delta

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// The routed test sink: customers c-0..c-2 go to the table low (by day of
// ts), c-3..c-5 to high; c-6 to rest, unless noDefault.
func routedConfig(t testing.TB, dir string, noDefault bool) *sinkConfig {
	t.Helper()
	c := newConfig()
	lowCols := kitColumns(t)
	lowCols[lowCols.Index("ts")].Nullable = false
	c.Routes = []routeConfig{
		{Name: "low", When: `$.customer in ['c-0', 'c-1', 'c-2']`, Table: filepath.Join(dir, "low"), Columns: lowCols, PartitionBy: []string{"day(ts)"}},
		{Name: "high", When: `$.customer in ['c-3', 'c-4', 'c-5']`, Table: filepath.Join(dir, "high"), Columns: kitColumns(t)},
	}
	if !noDefault {
		c.Routes = append(c.Routes, routeConfig{Table: filepath.Join(dir, "rest"), Columns: kitColumns(t)})
	}
	return c
}

func newRoutedTestSink(t testing.TB, dir string, noDefault bool) *routedSink {
	t.Helper()
	s, err := newRoutedSink(testCtx(t), routedConfig(t, dir, noDefault), testInfo)
	if err != nil {
		t.Fatalf("newRoutedSink: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// routeOf is the route the routed test sink sends the kit's event seq to.
func routeOf(seq int64) string {
	switch seq % 7 {
	case 0, 1, 2:
		return "low"
	case 3, 4, 5:
		return "high"
	}
	return "rest"
}

// wantRouted checks that each route's table holds, read back by arrow-go,
// each of partition p's from..to of that route exactly once, but skip.
func wantRouted(t *testing.T, dir, p string, from, to int64, tables []string, skip ...int64) {
	t.Helper()
	for _, table := range tables {
		got := seqsOf(readRows(t, filepath.Join(dir, table)))[p]
		slices.Sort(got)
		var want []int64
		for s := from; s <= to; s++ {
			if routeOf(s) == table && !slices.Contains(skip, s) {
				want = append(want, s)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("table %s holds %v of partition %s, want %v once each", table, got, p, want)
		}
	}
}

var allRoutes = []string{"low", "high", "rest"}

func TestRouteConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(c *sinkConfig)
		field string
	}{
		{"table beside routes", func(c *sinkConfig) { c.Table = "/x" }, "table"},
		{"route without table", func(c *sinkConfig) { c.Routes[1].Table = "" }, "routes[1].table"},
		{"same table twice", func(c *sinkConfig) { c.Routes[1].Table = c.Routes[0].Table + "/" }, "routes[1].table"},
		{"route after the default", func(c *sinkConfig) {
			c.Routes = append(c.Routes, routeConfig{When: "$.x == 1", Table: "/t/after", Columns: c.Routes[1].Columns})
		}, "routes[3].when"},
		{"bad when", func(c *sinkConfig) { c.Routes[0].When = "$.customer = 'c'" }, "routes[0].when"},
		{"bad partition", func(c *sinkConfig) { c.Routes[1].PartitionBy = []string{"day(ts)"} }, "routes[1].partition_by[0]"},
		{"dead letters in a route's table", func(c *sinkConfig) { c.DeadLetterTable = c.Routes[2].Table }, "dead_letter_table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := routedConfig(t, "/t", false)
			if err := c.Validate(); err != nil {
				t.Fatalf("the routed config: %v", err)
			}
			tc.edit(c)
			var fe *sinks.FieldError
			if err := c.Validate(); !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.field+":") {
				t.Fatalf("Validate() = %v, want an error of %s", err, tc.field)
			}
		})
	}
	if got := routedConfig(t, "/t", false).deadLetterTable(); got != "/t/dead_letters" {
		t.Fatalf("default dead-letter table %s, want /t/dead_letters", got)
	}
}

// TestRouteTables: each event lands in its route's table, and every
// flush commits the partition's txn to every table, rows or not, at the
// flush's last sequence number; a new sink resumes from it.
func TestRouteTables(t *testing.T) {
	dir := t.TempDir()
	w, wm, err := newRoutedTestSink(t, dir, false).Open(testCtx(t), "0")
	if err != nil || wm != nil {
		t.Fatalf("Open: %v, %v; want no watermark", wm, err)
	}
	writeFlush(t, w, sinktest.Events("0", 0, 19))
	writeFlush(t, w, sinktest.Events("0", 21, 22)) // low's customers only
	wantRouted(t, dir, "0", 0, 22, allRoutes, 20)
	for _, table := range allRoutes {
		if _, txns := logAdds(t, filepath.Join(dir, table)); txns[appID(testInfo, "0")] != 22 {
			t.Fatalf("table %s: txn of partition 0 is %d, want 22 (every flush commits every table)", table, txns[appID(testInfo, "0")])
		}
	}
	if files, _ := logAdds(t, filepath.Join(dir, "low")); !strings.HasPrefix(files[0], "ts_date=2026-01-02/") {
		t.Fatalf("low's data file %s, want it under its day's folder", files[0])
	}
	if _, wm, err := newRoutedTestSink(t, dir, false).Open(testCtx(t), "0"); err != nil || wm == nil || wm.SequenceNumber != 22 {
		t.Fatalf("reopened at %v, %v; want seq 22", wm, err)
	}
}

// TestRouteUnrouted: an event no route takes is refused with
// routing.ErrNoRoute and committed to the dead-letter table with that
// reason; the watermark moves past it.
func TestRouteUnrouted(t *testing.T) {
	dir := t.TempDir()
	w, _, err := newRoutedTestSink(t, dir, true).Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	evs := sinktest.Events("0", 0, 13)
	err = w.Write(testCtx(t), evs)
	var be *sinks.BatchError
	if !errors.As(err, &be) || len(be.Failed) != 2 || !errors.Is(be.Failed[0].Err, routing.ErrNoRoute) {
		t.Fatalf("Write: %v, want seqs 6 and 13 refused with ErrNoRoute", err)
	}
	var letters []sinks.DeadLetter
	for _, f := range be.Failed {
		letters = append(letters, sinks.DeadLetter{Event: evs[f.Index], Reason: f.Err.Error()})
	}
	if err := w.(sinks.DeadLetterer).DeadLetter(testCtx(t), letters); err != nil {
		t.Fatal(err)
	}
	if wm, err := w.Flush(testCtx(t)); err != nil || wm.SequenceNumber != 13 {
		t.Fatalf("Flush: %v, %v; want seq 13", wm, err)
	}
	wantRouted(t, dir, "0", 0, 13, []string{"low", "high"})
	var seqs []int64
	for _, r := range readRows(t, filepath.Join(dir, "dead_letters")) {
		seqs = append(seqs, r["sequence_number"].(int64))
		if !strings.Contains(r["reason"].(string), "no route takes the event") {
			t.Fatalf("letter %v, want the reason no route takes it", r)
		}
	}
	if !slices.Equal(seqs, []int64{6, 13}) {
		t.Fatalf("the dead-letter table holds %v, want 6 and 13", seqs)
	}
}

// TestRouteCrashBetweenTables stops a flush of seq 10..19 (or the first
// flush, 0..9) at a step of one table's commit, after the tables before
// it committed, as a process killed there. A new sink resumes from the
// lowest txn of the tables, or from the checkpoint (none here: from the
// start) when a table holds no txn of the partition yet; the replay
// leaves every event once in its table, the tables already past it
// skipping what they hold.
func TestRouteCrashBetweenTables(t *testing.T) {
	for _, tc := range []struct {
		route int
		step  string
		first bool  // the kill is in the first flush
		wm    int64 // -1: none
	}{
		{0, stepCommitted, false, 9},   // low committed 10..19, high and rest not
		{1, stepDataWritten, false, 9}, // low committed, high's files stored
		{2, stepCommitted, false, 19},  // every table committed, the process never heard
		{1, stepDataWritten, true, -1}, // low holds a txn, high and rest none
	} {
		name := tc.step + "/" + allRoutes[tc.route]
		if tc.first {
			name += "/first"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := newRoutedTestSink(t, dir, false)
			w, _, _ := s.Open(testCtx(t), "0")
			from := int64(0)
			if !tc.first {
				writeFlush(t, w, sinktest.Events("0", 0, 9))
				from = 10
			}
			s.tables[tc.route].setHook(func(step string) error {
				if step == tc.step {
					return errors.New("injected: killed")
				}
				return nil
			})
			if err := w.Write(testCtx(t), sinktest.Events("0", from, 19)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(testCtx(t)); err == nil {
				t.Fatal("Flush with a kill succeeded")
			}
			w2, wm, err := newRoutedTestSink(t, dir, false).Open(testCtx(t), "0")
			if err != nil || tc.wm < 0 && wm != nil || tc.wm >= 0 && (wm == nil || wm.SequenceNumber != tc.wm) {
				t.Fatalf("reopened at %v, %v; want seq %d", wm, err, tc.wm)
			}
			// A flush of nothing says no more than Open did: a checkpoint
			// of low's txn would skip what the others lack.
			if pos, err := w2.Flush(testCtx(t)); err != nil || (pos == nil) != (wm == nil) || pos != nil && pos.SequenceNumber != wm.SequenceNumber {
				t.Fatalf("an empty Flush after the reopen: %v, %v; want %v", pos, err, wm)
			}
			if batch := dedupe.After(sinktest.Events("0", 0, 29), wm); len(batch) > 0 {
				writeFlush(t, w2, batch)
			}
			wantRouted(t, dir, "0", 0, 29, allRoutes)
		})
	}
}

// TestRouteConformance runs the conformance kit on a routed sink: the
// committed events of a partition are those of its three tables.
func TestRouteConformance(t *testing.T) {
	dir := caseDirs()
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return newRoutedTestSink(t, dir(t), false) },
		Committed: func(t *testing.T, partition string) []int64 {
			var seqs []int64
			for _, table := range allRoutes {
				seqs = append(seqs, seqsOf(readRows(t, filepath.Join(dir(t), table)))[partition]...)
			}
			slices.Sort(seqs)
			return seqs
		},
		BadEvent: badEvent,
		Fencing:  true,
		// The process dies after the first table committed, before the
		// last one did: the sink's watermark, the lowest, has not moved.
		InterruptCommit: func(t *testing.T, s sinks.Sink) {
			s.(*routedSink).tables[len(allRoutes)-1].setHook(func(step string) error {
				if step == stepDataWritten {
					return errors.New("injected: killed before the last table's commit")
				}
				return nil
			})
		},
	})
}

// TestRouteFenced: a stale owner is fenced by the first table, before it
// commits anything to the others, and drops what every table's writer
// holds, as sinks.Writer's Flush says: it has nothing left to commit.
func TestRouteFenced(t *testing.T) {
	dir := t.TempDir()
	a, _, _ := newRoutedTestSink(t, dir, false).Open(testCtx(t), "0")
	b, _, _ := newRoutedTestSink(t, dir, false).Open(testCtx(t), "0")
	writeFlush(t, a, sinktest.Events("0", 0, 9))
	if err := b.Write(testCtx(t), sinktest.Events("0", 0, 9)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Flush(testCtx(t)); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("the stale owner's Flush: %v, want ErrFenced", err)
	}
	if b.(sinks.Batcher).FlushDue(time.Now().Add(time.Hour)) {
		t.Fatal("the fenced writer still holds a commit")
	}
	wantRouted(t, dir, "0", 0, 9, allRoutes)
}
