package iceberg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// replayColumns map the replay tests' events into the table replays: qty
// as int32 (the first run's mistake: the table's field is long) or int64
// (the fix).
func replayColumns(t *testing.T, qty string) func(*sinkConfig) {
	return func(c *sinkConfig) {
		c.Table, c.Columns = "replays", nil
		for _, col := range [][3]string{
			{"id", "$.id", "string"}, {"partition", "@partition", "string"},
			{"seq", "@sequence_number", "int64"}, {"qty", "$.qty", qty},
		} {
			cl, err := mapping.NewColumn(col[0], col[1], col[2])
			if err != nil {
				t.Fatal(err)
			}
			cl.Nullable = col[0] != "id"
			c.Columns = append(c.Columns, cl)
		}
	}
}

// replayEvents are the events of the first run: partition 0 seq 0..7
// (1, 3 and 5 with a qty beyond int32, 4 without its id, 5 a test event
// the fixed config filters out) and partition 1 seq 0 (beyond int32).
func replayEvents() map[string][]sinks.Event {
	ev := func(p string, seq int64, body string) sinks.Event {
		return sinks.Event{Partition: p, SequenceNumber: seq, Offset: fmt.Sprint(seq * 10), EnqueuedTime: time.Now().UTC(), Body: []byte(body)}
	}
	return map[string][]sinks.Event{
		"0": {
			ev("0", 0, `{"id":"o-0","qty":1}`), ev("0", 1, `{"id":"o-1","qty":3000000000}`),
			ev("0", 2, `{"id":"o-2","qty":2}`), ev("0", 3, `{"id":"o-3","qty":4000000000}`),
			ev("0", 4, `{"qty":5}`), ev("0", 5, `{"id":"t-5","qty":5000000000,"test":true}`),
			ev("0", 6, `{"id":"o-6","qty":6}`),
		},
		"1": {ev("1", 0, `{"id":"p1-0","qty":7000000000}`)},
	}
}

// replayLake is a lake after the first run: the table made by the fixed
// config, the first config's rows and dead letters committed.
func replayLake(t *testing.T) *lake {
	t.Helper()
	ctx := context.Background()
	l := newLake(t)
	_ = l.newSink(t, replayColumns(t, "int64")).Close(ctx)
	s := l.newSink(t, replayColumns(t, "int32"))
	for p, evs := range replayEvents() {
		w, _, err := s.Open(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		writeWithLetters(t, w, evs)
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		w.Close(ctx)
	}
	s.Close(ctx)
	return l
}

// replayAll replays letters as the CLI does: the test event dropped by
// the filter, the others through the mapping.
func replayAll(t *testing.T, s *sink, letters []deadletters.Letter, dryRun bool) map[int64]deadletters.Outcome {
	t.Helper()
	out := map[int64]deadletters.Outcome{}
	for i := range letters {
		l := &letters[i]
		o := deadletters.ReplayOptions{DryRun: dryRun, Revision: "fixed-rev", Drop: strings.Contains(string(l.Event.Body), `"test":true`)}
		got, err := s.Replay(context.Background(), l, o)
		if err != nil {
			t.Fatalf("replay letter %d: %v", l.ID, err)
		}
		out[l.ID] = got
	}
	return out
}

// describeOutcome is an outcome in a word, and its rows.
func describeOutcome(o deadletters.Outcome) string {
	switch {
	case o.AlreadyReplayed:
		return "already"
	case o.Reason != "":
		return "again: " + o.Reason
	case o.Dropped:
		return "dropped"
	}
	var rows []string
	for _, r := range o.Rows {
		rows = append(rows, fmt.Sprintf("%s %v", r.Table, r.Values))
	}
	return "rows " + strings.Join(rows, "; ")
}

// TestReplayDeadLetters: after a first run whose mapping refused events
// (a qty beyond int32, an event without its id), the fixed config's sink
// lists the letters with IDs from their events' positions; a dry run
// writes nothing; a replay of the first letter, then of the others,
// leaves exactly the rows a correct first run makes, with the table's
// watermarks where they were (a writer opened before the replay then
// commits without being fenced); the letter that fails again is stored
// anew with its revision; a replay run again writes nothing, also after
// snapshot expiry and compaction.
func TestReplayDeadLetters(t *testing.T) {
	ctx := context.Background()
	l := replayLake(t)
	s := l.newSink(t, replayColumns(t, "int64"))
	letters, err := s.Letters(ctx, deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, lt := range letters {
		ids = append(ids, lt.ID)
		if lt.Revision != "" || lt.Table != "lake.replays" || lt.Connector != testInfo.Connector || lt.ReplayedAt != nil {
			t.Errorf("letter %d: %+v, want no revision (none given), table lake.replays, not replayed", lt.ID, lt)
		}
	}
	if want := []int64{1000000000001, 1000000000003, 1000000000004, 1000000000005, 2000000000000}; !slices.Equal(ids, want) {
		t.Fatalf("letter IDs %v, want %v (partition+1, then the sequence number)", ids, want)
	}
	counts, err := s.Counts(ctx, deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var byPartition []string
	for _, c := range counts {
		byPartition = append(byPartition, fmt.Sprintf("%s/%d", c.Partition, c.Letters))
	}
	if !slices.Equal(byPartition, []string{"0/1", "0/1", "0/1", "0/1", "1/1"}) || !strings.Contains(counts[0].Reason, `"id"`) {
		t.Fatalf("counts %+v, want one per letter (each reason names its value), partition 0's first", counts)
	}

	dataBefore, dlBefore := l.loadNamed(t, "replays").CurrentSnapshot().SnapshotID, l.loadNamed(t, "replays_dead_letters").CurrentSnapshot().SnapshotID
	dry := replayAll(t, s, letters, true)
	want := map[int64]string{
		1000000000001: "rows lake.replays [o-1 0 1 3000000000]",
		1000000000003: "rows lake.replays [o-3 0 3 4000000000]",
		1000000000004: `again: column "id": missing value at $.id`,
		1000000000005: "dropped",
		2000000000000: "rows lake.replays [p1-0 1 0 7000000000]",
	}
	for id, o := range dry {
		if got := describeOutcome(o); got != want[id] {
			t.Errorf("dry run of letter %d: %s, want %s", id, got, want[id])
		}
	}
	if l.loadNamed(t, "replays").CurrentSnapshot().SnapshotID != dataBefore || l.loadNamed(t, "replays_dead_letters").CurrentSnapshot().SnapshotID != dlBefore {
		t.Fatal("the dry run committed")
	}

	// A live writer of partition 0, opened before the replay.
	live := l.newSink(t, replayColumns(t, "int64"))
	lw, wm, err := live.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer lw.Close(ctx)
	if got := replayAll(t, s, letters[:1], false); describeOutcome(got[letters[0].ID]) != want[letters[0].ID] {
		t.Fatalf("replay of the first letter: %s", describeOutcome(got[letters[0].ID]))
	}
	rest, err := s.Letters(ctx, deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest) != 4 {
		t.Fatalf("after the first letter's replay %d letters are left, want 4", len(rest))
	}
	for id, o := range replayAll(t, s, rest, false) {
		if got := describeOutcome(o); got != want[id] {
			t.Errorf("replay of letter %d: %s, want %s", id, got, want[id])
		}
	}
	meta := l.loadNamed(t, "replays").Metadata()
	for _, p := range []string{"0", "1"} {
		if got, _ := watermarkOf(meta, watermarkKey(testInfo, p)); got == nil || got.SequenceNumber != map[string]int64{"0": 6, "1": 0}[p] {
			t.Errorf("partition %s's watermark after the replay: %v, want the first run's", p, got)
		}
	}
	if err := lw.Write(ctx, []sinks.Event{{Partition: "0", SequenceNumber: 7, Offset: "70", Body: []byte(`{"id":"o-7","qty":7}`)}}); err != nil {
		t.Fatal(err)
	}
	if pos, err := lw.Flush(ctx); err != nil || pos.SequenceNumber != 7 || wm.SequenceNumber != 6 {
		t.Fatalf("the live writer's flush after the replay: %v, %v; want seq 7 committed", pos, err)
	}
	wantSeqs := map[string][]int64{"0": {0, 1, 2, 3, 6, 7}, "1": {0}}
	if got := l.scanNamed(t, "replays"); !equalSeqs(got, wantSeqs) {
		t.Fatalf("the table holds %v, want %v: what a correct first run writes", got, wantSeqs)
	}

	all, err := s.Letters(ctx, deadletters.Filter{Replayed: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range all {
		if again := lt.ID == 1000000000004; (lt.ReplayedAt == nil) != again || again && lt.Revision != "fixed-rev" {
			t.Errorf("letter %d: replayed at %v, revision %s; want every letter replayed but the one without an id, which has the new revision", lt.ID, lt.ReplayedAt, lt.Revision)
		}
	}
	if keys, _ := l.deadLetterRows(t, "replays_dead_letters"); len(keys) != 6 {
		t.Errorf("dead-letter rows %v, want the 5 letters and the newer version of the one that failed again", keys)
	}

	// The marks outlive the snapshots that made them.
	m := &s.cfg.Maintenance
	m.KeepSnapshots, m.MaxSnapshotAge, m.Compact = 1, time.Nanosecond, true
	for _, d := range []*dest{s.dests[0], s.dl} {
		d.mu.Lock()
		if _, err := s.reload(ctx, d); err != nil {
			t.Fatal(err)
		}
		err := s.maintain(ctx, d)
		d.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(l.loadNamed(t, "replays").Metadata().Snapshots()); n != 1 {
		t.Fatalf("%d snapshots after expiry, want 1", n)
	}
	for id, o := range replayAll(t, s, letters, false) {
		if got := describeOutcome(o); got != "already" && id != 1000000000004 {
			t.Errorf("replay of letter %d after maintenance: %s, want already replayed", id, got)
		}
	}
	if got := l.scanNamed(t, "replays"); !equalSeqs(got, wantSeqs) {
		t.Fatalf("a second replay left %v, want %v", got, wantSeqs)
	}
}

// TestReplayOnceUnderRaces: two replays of one letter at once (two
// processes' sinks) write its row once, the loser told it was already
// replayed; a replay that dies before its commit writes nothing and
// leaves the letter to the next.
func TestReplayOnceUnderRaces(t *testing.T) {
	ctx := context.Background()
	l := replayLake(t)
	a, b := l.newSink(t, replayColumns(t, "int64")), l.newSink(t, replayColumns(t, "int64"))
	letters, err := a.Letters(ctx, deadletters.Filter{ID: 1000000000001})
	if err != nil || len(letters) != 1 {
		t.Fatalf("letter 1000000000001: %v %v", letters, err)
	}
	// Both pass the check before the commit, then race to commit.
	var both sync.WaitGroup
	both.Add(2)
	for _, s := range []*sink{a, b} {
		s.setHook(func(step string) error {
			if step == stepDataWritten {
				both.Done()
				both.Wait()
			}
			return nil
		})
	}
	outs := make([]deadletters.Outcome, 2)
	var wg sync.WaitGroup
	for i, s := range []*sink{a, b} {
		wg.Go(func() {
			var err error
			if outs[i], err = s.Replay(ctx, &letters[0], deadletters.ReplayOptions{}); err != nil {
				t.Errorf("replay %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	a.setHook(nil)
	if got := []string{describeOutcome(outs[0]), describeOutcome(outs[1])}; !slices.Contains(got, "already") || !slices.Contains(got, "rows lake.replays [o-1 0 1 3000000000]") {
		t.Fatalf("two replays at once: %q, want one replayed and one already replayed", got)
	}

	// A replay that dies before its commit.
	c := l.newSink(t, replayColumns(t, "int64"))
	c.setHook(func(step string) error {
		if step == stepBeforeSwap {
			return errors.New("injected: the replay dies before its commit")
		}
		return nil
	})
	letters, err = c.Letters(ctx, deadletters.Filter{ID: 1000000000003})
	if err != nil || len(letters) != 1 {
		t.Fatalf("letter 1000000000003: %v %v", letters, err)
	}
	if _, err := c.Replay(ctx, &letters[0], deadletters.ReplayOptions{}); err == nil {
		t.Fatal("the replay passed the injected failure")
	}
	if out := replayAll(t, a, letters, false); describeOutcome(out[letters[0].ID]) != "rows lake.replays [o-3 0 3 4000000000]" {
		t.Fatalf("the replay after the failed one: %s", describeOutcome(out[letters[0].ID]))
	}
	want := map[string][]int64{"0": {0, 1, 2, 3, 6}}
	if got := l.scanNamed(t, "replays"); !equalSeqs(got, want) {
		t.Fatalf("the table holds %v, want %v: each replayed row once", got, want)
	}
}

// replayIntoNewRoute replays the letters of the events no route of l's
// routed sink took (TestRoutedEventNoRouteTakes: seq 3..6 of partition 0)
// once the default route is added: they go into its table, marked there;
// the store finds the marks in that table, and a second replay writes
// nothing.
func replayIntoNewRoute(t *testing.T, l *lake) {
	t.Helper()
	ctx := context.Background()
	s := l.newSink(t, routed)
	letters, err := s.Letters(ctx, deadletters.Filter{})
	if err != nil || len(letters) != 4 || letters[0].Table != "*" {
		t.Fatalf("letters %+v, %v; want the 4 events no route took, table *", letters, err)
	}
	for id, o := range replayAll(t, s, letters, false) {
		if len(o.Rows) != 1 || o.Rows[0].Table != "lake.rest" || o.AlreadyReplayed || o.Reason != "" {
			t.Errorf("replay of letter %d: %s, want a row of lake.rest", id, describeOutcome(o))
		}
	}
	if got := l.scanNamed(t, "rest")["0"]; !slices.Equal(got, []int64{3, 4, 5, 6}) {
		t.Errorf("table rest holds %v, want [3 4 5 6]", got)
	}
	if left, err := s.Letters(ctx, deadletters.Filter{}); err != nil || len(left) != 0 {
		t.Fatalf("%d letters left after the replay (%v), want none: the marks are in table rest", len(left), err)
	}
	for id, o := range replayAll(t, l.newSink(t, routed), letters, false) {
		if !o.AlreadyReplayed {
			t.Errorf("second replay of letter %d: %s, want already replayed", id, describeOutcome(o))
		}
	}
}
