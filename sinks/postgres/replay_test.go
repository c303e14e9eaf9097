package postgres

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// narrowAmount returns cfg with amount mapped as numeric(4,2): the kit's
// events from seq 100 on (amount 100.25 and up) do not convert, a mapping
// mistake that the corrected config (the kit's numeric(12,2)) fixes.
func narrowAmount(t *testing.T, cfg *sinkConfig) *sinkConfig {
	t.Helper()
	c := *cfg
	c.Columns = append(mapping.Columns(nil), cfg.Columns...)
	i := c.Columns.Index("amount")
	typ, err := mapping.ParseType("numeric(4,2)")
	if err != nil {
		t.Fatal(err)
	}
	c.Columns[i].Type = typ
	return &c
}

// firstRun writes events to partition "0" of s as the runner does: what
// Write refuses is dead-lettered (stored with revision rev) and committed
// by the same Flush.
func firstRun(t *testing.T, s *sink, events []sinks.Event, rev string) {
	t.Helper()
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	err = w.Write(ctx, events)
	var be *sinks.BatchError
	if errors.As(err, &be) {
		var letters []sinks.DeadLetter
		for _, f := range be.Failed {
			letters = append(letters, sinks.DeadLetter{Event: events[f.Index].Received(), Reason: f.Err.Error()})
		}
		err = w.(sinks.DeadLetterer).DeadLetter(deadletters.WithRevision(ctx, rev), letters)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// tableRows reads the append table in a canonical order, without rid
// (the storage order).
func tableRows(t *testing.T, dsn, sql string) []string {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const ordersAsText = `SELECT concat_ws('|', id, seq, customer, amount, ts, part, enqueued) FROM orders ORDER BY seq, id`

// replayAll replays every letter f selects through s and returns the
// outcomes.
func replayAll(t *testing.T, s *sink, f deadletters.Filter, o deadletters.ReplayOptions) []deadletters.Outcome {
	t.Helper()
	ctx := testCtx(t)
	letters, err := s.Letters(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	var out []deadletters.Outcome
	for i := range letters {
		r, err := s.Replay(ctx, &letters[i], o)
		if err != nil {
			t.Fatalf("replay letter %d: %v", letters[i].ID, err)
		}
		out = append(out, r)
	}
	return out
}

// TestReplayWritesWhatACorrectRunWould: events a mapping refused are dead
// letters that keep the event (position, enqueued time, key, properties,
// body) and the revision that refused them. After the mapping is
// corrected, a dry run writes nothing; a replay stopped after two letters,
// then crashed inside the third letter's transaction (before COPY, then
// before COMMIT), then run again over every letter, replayed ones
// included, leaves the table exactly as a correct first run of the same
// events leaves it, each row once; the partition's watermark does not
// move; and a further replay finds nothing to do.
func TestReplayWritesWhatACorrectRunWould(t *testing.T) {
	ctx := testCtx(t)
	events := sinktest.Events("0", 95, 104) // 100..104 do not fit numeric(4,2)

	want := newDB(t)
	execSQL(t, want, appendTable)
	firstRun(t, newTestSink(t, appendConfig(t, want)), events, "good")

	dsn := newDB(t)
	execSQL(t, dsn, appendTable)
	firstRun(t, newTestSink(t, narrowAmount(t, appendConfig(t, dsn))), events, "rev-1")
	if n := len(tableRows(t, dsn, ordersAsText)); n != 5 {
		t.Fatalf("the first run wrote %d rows, want 5 (seq 95..99)", n)
	}
	s := newTestSink(t, appendConfig(t, dsn))
	wm, err := s.readWatermark(ctx, "0")
	if err != nil || wm == nil || wm.SequenceNumber != 104 {
		t.Fatalf("watermark after the first run = %v, %v; want seq 104", wm, err)
	}

	letters, err := s.Letters(ctx, deadletters.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 5 {
		t.Fatalf("%d letters, want 5", len(letters))
	}
	for i, l := range letters {
		ev := events[5+i]
		if !reflect.DeepEqual(l.Event, ev) {
			t.Errorf("letter %d keeps\n%+v\nwant the event as received\n%+v", l.ID, l.Event, ev)
		}
		if l.Revision != "rev-1" || !strings.Contains(l.Reason, "amount") || l.ReplayedAt != nil {
			t.Errorf("letter %d: revision %q, reason %q, replayed %v; want rev-1, the amount's reason, not replayed", l.ID, l.Revision, l.Reason, l.ReplayedAt)
		}
	}
	counts, err := s.Counts(ctx, deadletters.Filter{Reason: "does not fit"})
	if err != nil || len(counts) != 5 || counts[0].Letters != 1 || counts[0].Partition != "0" {
		t.Fatalf("Counts = %+v, %v; want 5 reasons (one per amount) of one letter each in partition 0", counts, err)
	}

	for _, o := range replayAll(t, s, deadletters.Filter{}, deadletters.ReplayOptions{DryRun: true, Revision: "rev-2"}) {
		if o.Reason != "" || len(o.Rows) != 1 {
			t.Fatalf("dry run: %+v, want one row per letter", o)
		}
	}
	if n := len(tableRows(t, dsn, ordersAsText)); n != 5 {
		t.Fatalf("the dry run wrote: %d rows, want 5", n)
	}

	// Stopped after two letters.
	for i := range 2 {
		if _, err := s.Replay(ctx, &letters[i], deadletters.ReplayOptions{Revision: "rev-2"}); err != nil {
			t.Fatal(err)
		}
	}
	// Crashed inside the third letter's transaction.
	for _, point := range []string{faultBeforeCopy, faultBeforeCommit} {
		s.faults = func(p string) error {
			if p == point {
				return errCrash
			}
			return nil
		}
		if _, err := s.Replay(ctx, &letters[2], deadletters.ReplayOptions{Revision: "rev-2"}); !errors.Is(err, errCrash) {
			t.Fatalf("replay crashed at %s: %v, want the crash", point, err)
		}
	}
	s.faults = nil
	if n := len(tableRows(t, dsn, ordersAsText)); n != 7 {
		t.Fatalf("after two letters and a crash: %d rows, want 7", n)
	}

	outs := replayAll(t, s, deadletters.Filter{Replayed: true}, deadletters.ReplayOptions{Revision: "rev-2"})
	already := 0
	for _, o := range outs {
		if o.AlreadyReplayed {
			already++
		} else if o.Reason != "" || len(o.Rows) != 1 {
			t.Errorf("replay: %+v, want one row", o)
		}
	}
	if already != 2 {
		t.Errorf("%d letters found already replayed, want 2", already)
	}
	if got, exp := tableRows(t, dsn, ordersAsText), tableRows(t, want, ordersAsText); !reflect.DeepEqual(got, exp) {
		t.Fatalf("after the replay the table holds\n%s\nwant what a correct first run wrote\n%s", strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
	if got, err := s.readWatermark(ctx, "0"); err != nil || got == nil || got.SequenceNumber != 104 {
		t.Errorf("watermark after the replay = %v, %v; want seq 104, untouched", got, err)
	}
	if outs := replayAll(t, s, deadletters.Filter{}, deadletters.ReplayOptions{}); len(outs) != 0 {
		t.Errorf("a second replay found %d letters to replay, want none", len(outs))
	}
	if n := queryInts(t, dsn, `SELECT count(*) FROM ehsink_dead_letters WHERE replayed_at IS NOT NULL`); n[0] != 5 {
		t.Errorf("%d letters marked replayed, want 5", n[0])
	}
}

// TestReplayFailsAgainWithTheNewReason: a letter whose event the current
// config still refuses stays, unreplayed, with the new reason and the
// revision that refused it again; nothing is written. A dry run reports
// the reason and changes nothing.
func TestReplayFailsAgainWithTheNewReason(t *testing.T) {
	ctx := testCtx(t)
	dsn := newDB(t)
	execSQL(t, dsn, appendTable)
	narrow := narrowAmount(t, appendConfig(t, dsn))
	firstRun(t, newTestSink(t, narrow), sinktest.Events("0", 100, 100), "rev-1")
	s := newTestSink(t, narrow)

	outs := replayAll(t, s, deadletters.Filter{}, deadletters.ReplayOptions{DryRun: true, Revision: "rev-2"})
	if len(outs) != 1 || !strings.Contains(outs[0].Reason, "amount") {
		t.Fatalf("dry run: %+v, want the amount's reason", outs)
	}
	l, _ := s.Letters(ctx, deadletters.Filter{})
	if l[0].Revision != "rev-1" {
		t.Fatalf("the dry run stored revision %q", l[0].Revision)
	}
	outs = replayAll(t, s, deadletters.Filter{}, deadletters.ReplayOptions{Revision: "rev-2"})
	if len(outs) != 1 || !strings.Contains(outs[0].Reason, "amount") {
		t.Fatalf("replay: %+v, want the amount's reason", outs)
	}
	l, _ = s.Letters(ctx, deadletters.Filter{})
	if len(l) != 1 || l[0].Revision != "rev-2" || l[0].ReplayedAt != nil || !l[0].FailedAt.After(l[0].Event.EnqueuedTime) {
		t.Fatalf("the letter after failing again: %+v; want it unreplayed with revision rev-2", l)
	}
	if n := len(tableRows(t, dsn, ordersAsText)); n != 0 {
		t.Fatalf("%d rows written, want none", n)
	}
}

// TestReplayKeepsTheNewerUpsert: in upsert mode, a replayed letter older
// than the row its key holds (the same partition, a lower sequence
// number) does not overwrite it: the ordering guard the running sink uses
// applies to replays. The letter is replayed all the same, as a correct
// first run would have overwritten that version too.
func TestReplayKeepsTheNewerUpsert(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, `CREATE TABLE public.latest (id text NOT NULL, seq bigint, customer text PRIMARY KEY, amount numeric(12,2),
		ts timestamptz, part text, enqueued timestamptz, _ehsink_partition text, _ehsink_seq bigint)`)
	old, newer := sinktest.Event("0", 100), sinktest.Event("0", 1003) // both customer c-2; 100.25 does not fit numeric(4,2)
	firstRun(t, newTestSink(t, narrowAmount(t, upsertConfig(t, dsn))), []sinks.Event{old, newer}, "rev-1")
	s := newTestSink(t, upsertConfig(t, dsn))
	outs := replayAll(t, s, deadletters.Filter{}, deadletters.ReplayOptions{})
	if len(outs) != 1 || outs[0].Reason != "" {
		t.Fatalf("replay: %+v", outs)
	}
	got := tableRows(t, dsn, `SELECT concat_ws('|', customer, seq, amount) FROM latest`)
	if want := []string{"c-2|1003|3.25"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("latest holds %q, want %q: the newer row kept", got, want)
	}
}
