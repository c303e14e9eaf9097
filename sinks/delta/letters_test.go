package delta

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// tableRows reads a local table as a reader does through package
// deltalog (checkpoints included, which logAdds does not read), its rows
// sorted by partition and seq.
func tableRows(t *testing.T, dir string) (rows []map[string]any, snap *deltalog.Snapshot) {
	t.Helper()
	store, err := deltalog.NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err = deltalog.New(store).Load(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.SortedFiles() {
		p, err := url.PathUnescape(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		tb, err := parquettest.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatalf("data file %s: %v", a.Path, err)
		}
		rows = append(rows, tb.Rows...)
	}
	slices.SortFunc(rows, func(a, b map[string]any) int {
		return cmp.Or(cmp.Compare(fmt.Sprint(a["partition"]), fmt.Sprint(b["partition"])), cmp.Compare(fmt.Sprint(a["seq"]), fmt.Sprint(b["seq"])))
	})
	return rows, snap
}

// without returns e with its body's field removed and the extra fields
// added.
func without(t *testing.T, e sinks.Event, field string, extra map[string]any) sinks.Event {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Body, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, field)
	for k, v := range extra {
		m[k] = v
	}
	var err error
	if e.Body, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return e
}

// partitionTxns are the partitions' own txns of a snapshot (not the
// letters' marks).
func partitionTxns(snap *deltalog.Snapshot) map[string]int64 {
	out := map[string]int64{}
	for app, txn := range snap.Txns {
		if strings.HasPrefix(app, "ehsink/") {
			out[app] = txn.Version
		}
	}
	return out
}

// TestReplayLetters: a mapping requires a customer the table allows to be
// missing, and dead-letters the events without one; another event has an
// amount no mapping takes, and one is a test event the corrected config's
// filter drops. With the corrected mapping, a dry run writes nothing; a
// replay killed once after its commit file was created, then a replay of
// every letter, leave exactly the rows of a correct first run, marked in
// the data table's log (checkpointed, the commits that held the marks
// cleaned up), with the partitions' txns unmoved. The letter that fails
// again stays with its new reason and revision, a second replay writes
// nothing, and the letters' IDs are the same in a new store.
func TestReplayLetters(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir, correct := filepath.Join(base, "t"), filepath.Join(base, "correct")
	fixed := func(c *sinkConfig) {
		c.CheckpointInterval, c.Properties = 2, map[string]string{"delta.logRetentionDuration": "interval 0 seconds"}
	}
	strict := func(c *sinkConfig) { fixed(c); c.Columns[3].Nullable = false }
	newTestSink(t, dir, fixed) // the table lets customer be missing

	p0, p1 := sinktest.Events("0", 0, 9), sinktest.Events("1", 0, 4)
	for _, seq := range []int64{2, 5} {
		p0[seq] = without(t, p0[seq], "customer", nil)
	}
	p0[7] = without(t, p0[7], "customer", map[string]any{"test": true})
	p0[8] = badEvent("0", 8)
	p1[3] = without(t, p1[3], "customer", nil)
	isTest := func(e *sinks.Event) bool { return strings.Contains(string(e.Body), `"test":true`) }

	// The first run, with the strict mapping.
	s := newTestSink(t, dir, strict)
	for _, evs := range [][]sinks.Event{p0, p1} {
		w, _, err := s.Open(testCtx(t), evs[0].Partition)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := writeWithLetters(t, w, evs); err != nil {
			t.Fatal(err)
		}
		_ = w.Close(testCtx(t))
	}
	// What a correct first run makes: the filter drops the test event.
	cs := newTestSink(t, correct, fixed)
	for _, evs := range [][]sinks.Event{p0, p1} {
		w, _, _ := cs.Open(testCtx(t), evs[0].Partition)
		if _, err := writeWithLetters(t, w, slices.DeleteFunc(slices.Clone(evs), func(e sinks.Event) bool { return isTest(&e) })); err != nil {
			t.Fatal(err)
		}
	}
	want, _ := tableRows(t, correct)

	store := newTestSink(t, dir, fixed)
	ids := func(ls []deadletters.Letter) []int64 {
		var out []int64
		for _, l := range ls {
			out = append(out, l.ID)
		}
		return out
	}
	letters, err := store.Letters(testCtx(t), deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	// seq × 10,000 + partition + 1, oldest first.
	if got := ids(letters); !slices.Equal(got, []int64{20001, 50001, 70001, 80001, 30002}) {
		t.Fatalf("letter IDs %v", got)
	}
	if l := letters[0]; l.Connector != "c1" || l.Table != dir || !strings.Contains(l.Reason, "customer") || l.ReplayedAt != nil ||
		l.Event.Properties["source"] != "sinktest" || *l.Event.PartitionKey != "c-2" {
		t.Fatalf("letter %+v", l)
	}
	counts, err := store.Counts(testCtx(t), deadletters.Filter{Reason: "customer"})
	if err != nil || len(counts) != 2 || counts[0].Partition != "0" || counts[0].Letters != 3 || counts[1].Letters != 1 {
		t.Fatalf("counts %+v, %v", counts, err)
	}
	if got, _ := store.Letters(testCtx(t), deadletters.Filter{ID: 30002}); len(got) != 1 || got[0].Event.Partition != "1" {
		t.Fatalf("letter 30002: %+v", got)
	}

	replayAll := func(o deadletters.ReplayOptions, ls []deadletters.Letter) []deadletters.Outcome {
		t.Helper()
		var out []deadletters.Outcome
		for i := range ls {
			o.Drop = isTest(&ls[i].Event)
			r, err := store.Replay(testCtx(t), &ls[i], o)
			if err != nil {
				t.Fatalf("replay letter %d: %v", ls[i].ID, err)
			}
			out = append(out, r)
		}
		return out
	}
	_, before := tableRows(t, dir)
	_, dlBefore := tableRows(t, dir+"_dead_letters")
	files := len(dataFiles(t, dir)) + len(dataFiles(t, dir+"_dead_letters"))
	dry := replayAll(deadletters.ReplayOptions{DryRun: true, Revision: "fixed"}, letters)
	if r := dry[0]; len(r.Rows) != 1 || r.Rows[0].Values[3] != nil || r.Rows[0].Values[0] != "0-2" || r.Reason != "" {
		t.Fatalf("dry run of letter 20001: %+v", r)
	}
	if !dry[2].Dropped || !strings.Contains(dry[3].Reason, "amount") || len(dry[4].Rows) != 1 {
		t.Fatalf("dry run: %+v", dry)
	}
	_, after := tableRows(t, dir)
	_, dlAfter := tableRows(t, dir+"_dead_letters")
	if after.Version != before.Version || dlAfter.Version != dlBefore.Version || len(dataFiles(t, dir))+len(dataFiles(t, dir+"_dead_letters")) != files {
		t.Fatalf("the dry run wrote: versions %d -> %d, %d -> %d", before.Version, after.Version, dlBefore.Version, dlAfter.Version)
	}

	// Killed after the first letter's commit file was created, before it
	// heard so.
	store.setHook(func(step string) error {
		if step == stepCommitted {
			return errors.New("injected: killed after the commit file was created")
		}
		return nil
	})
	if _, err := store.Replay(testCtx(t), &letters[0], deadletters.ReplayOptions{Revision: "fixed"}); err == nil {
		t.Fatal("a replay killed after its commit succeeded")
	}
	store.setHook(nil)
	out := replayAll(deadletters.ReplayOptions{Revision: "fixed"}, letters)
	if !out[0].AlreadyReplayed || len(out[1].Rows) != 1 || !out[2].Dropped || !strings.Contains(out[3].Reason, "amount") || len(out[4].Rows) != 1 {
		t.Fatalf("replay: %+v", out)
	}
	got, snap := tableRows(t, dir)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the replay the table holds\n%v\nwant (a correct first run)\n%v", got, want)
	}
	if !reflect.DeepEqual(partitionTxns(snap), partitionTxns(before)) {
		t.Fatalf("the replay moved the partitions' txns: %v, before %v", partitionTxns(snap), partitionTxns(before))
	}
	if _, err := os.Stat(filepath.Join(dir, deltalog.CommitName(0))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("version 0 of the table is still there (%v): the marks were not read from a checkpoint", err)
	}

	// Only the letter that failed again is left, with its new revision;
	// its two rows are in the dead-letter table.
	left, err := store.Letters(testCtx(t), deadletters.Filter{})
	if err != nil || len(left) != 1 || left[0].ID != 80001 || left[0].Revision != "fixed" || !left[0].FailedAt.After(letters[3].FailedAt) {
		t.Fatalf("letters left: %+v, %v", left, err)
	}
	if rows, _ := tableRows(t, dir+"_dead_letters"); len(rows) != 6 {
		t.Fatalf("the dead-letter table has %d rows, want 5 letters and the new row of the one that failed again", len(rows))
	}
	again := replayAll(deadletters.ReplayOptions{Revision: "fixed"}, letters)
	for i, r := range again {
		if r.AlreadyReplayed != (i != 3) {
			t.Fatalf("second replay of letter %d: %+v", letters[i].ID, r)
		}
	}
	if now, _ := tableRows(t, dir); !reflect.DeepEqual(now, want) {
		t.Fatalf("a second replay wrote rows: %v", now)
	}

	all, err := newTestSink(t, dir, fixed).Letters(testCtx(t), deadletters.Filter{Replayed: true})
	if err != nil || !slices.Equal(ids(all), ids(letters)) {
		t.Fatalf("letters of a new store: %v, %v", ids(all), err)
	}
	for _, l := range all {
		if (l.ReplayedAt != nil) != (l.ID != 80001) {
			t.Fatalf("letter %d replayed at %v", l.ID, l.ReplayedAt)
		}
	}
}

// TestReplayLettersRouted: the events no route took are replayed once a
// default route is added, into its table, as a first run with that route
// would have written them; a second replay writes nothing.
func TestReplayLettersRouted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, _, err := newRoutedTestSink(t, dir, true).Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeWithLetters(t, w, sinktest.Events("0", 0, 13)); err != nil {
		t.Fatal(err)
	}
	store := newRoutedTestSink(t, dir, false)
	letters, err := store.Letters(testCtx(t), deadletters.Filter{Reason: "no route"})
	if err != nil || len(letters) != 2 || letters[0].ID != 60001 || letters[1].ID != 130001 || letters[0].Table != "*" {
		t.Fatalf("letters: %+v, %v", letters, err)
	}
	for _, want := range []bool{false, true} {
		for i := range letters {
			out, err := store.Replay(testCtx(t), &letters[i], deadletters.ReplayOptions{})
			if err != nil || out.AlreadyReplayed != want || (!want && (len(out.Rows) != 1 || out.Rows[0].Table != filepath.Join(dir, "rest"))) {
				t.Fatalf("replay of letter %d (already replayed: %v): %+v, %v", letters[i].ID, want, out, err)
			}
		}
	}
	wantRouted(t, dir, "0", 0, 13, allRoutes)
}
