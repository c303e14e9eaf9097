package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// change is an event of the delete tests: op u writes key's row with
// v = the event's sequence number, op d deletes it.
type change struct {
	op  string
	key int
}

// changeEvents makes events seq from.. of partition p from changes.
func changeEvents(p string, from int64, changes ...change) []sinks.Event {
	out := make([]sinks.Event, len(changes))
	for i, c := range changes {
		seq := from + int64(i)
		out[i] = sinks.Event{Partition: p, SequenceNumber: seq, Offset: fmt.Sprint(seq * 10),
			EnqueuedTime: time.Unix(1_700_000_000, 0).UTC(),
			Body:         fmt.Appendf(nil, `{"op": %q, "id": "k%d", "v": %d}`, c.op, c.key, seq)}
	}
	return out
}

// churn is n changes over keys keys, about one in four a delete, in an
// order with updates after deletes, deletes of missing keys and runs of
// one key within a batch.
func churn(n, keys int) []change {
	out := make([]change, n)
	x := uint32(2463534242)
	for i := range out {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		op := "u"
		if x%4 == 0 {
			op = "d"
		}
		out[i] = change{op, int(x>>8) % keys}
	}
	return out
}

// wantState is what the table holds after changes from seq 0: per live
// key, the sequence number of its last update.
func wantState(changes []change) map[string]int64 {
	state := map[string]int64{}
	for i, c := range changes {
		k := fmt.Sprintf("k%d", c.key)
		if c.op == "d" {
			delete(state, k)
		} else {
			state[k] = int64(i)
		}
	}
	return state
}

func deleteConfig(t testing.TB, dsn string) *sinkConfig {
	t.Helper()
	var cs mapping.Columns
	if err := cs.UnmarshalConfig([]any{
		map[string]any{"name": "id", "from": "$.id"},
		map[string]any{"name": "v", "from": "$.v", "type": "bigint"},
	}); err != nil {
		t.Fatal(err)
	}
	return &sinkConfig{DSN: secret.String(dsn), Table: "public.kv", Mode: modeUpsert, Key: []string{"id"}, Columns: cs,
		CreateTable: true, PoolSize: 2, Delete: &cdc.Delete{When: "$.op == 'd'"}}
}

// tableState reads the table as key → v.
func tableState(t *testing.T, dsn string) map[string]int64 {
	t.Helper()
	ctx := testCtx(t)
	conn, err := newConn(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT id, v FROM public.kv`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func wantTable(t *testing.T, dsn string, want map[string]int64) {
	t.Helper()
	got := tableState(t, dsn)
	if !maps.Equal(got, want) {
		var diff []string
		for _, k := range slices.Sorted(maps.Keys(want)) {
			if g, ok := got[k]; !ok || g != want[k] {
				diff = append(diff, fmt.Sprintf("%s: want v=%d, got %v", k, want[k], describeV(g, ok)))
			}
		}
		for _, k := range slices.Sorted(maps.Keys(got)) {
			if _, ok := want[k]; !ok {
				diff = append(diff, fmt.Sprintf("%s: want no row (deleted), got v=%d", k, got[k]))
			}
		}
		t.Fatalf("table differs in %d keys:\n%s", len(diff), strings.Join(diff, "\n"))
	}
}

func describeV(v int64, ok bool) string {
	if !ok {
		return "no row"
	}
	return fmt.Sprintf("v=%d", v)
}

// TestDeleteSequences writes inserts, updates and deletes through the
// writer, one flush per batch, and reads the table back.
func TestDeleteSequences(t *testing.T) {
	tests := []struct {
		name    string
		changes []change
		batch   int
	}{
		{"insert update delete", []change{{"u", 1}, {"u", 2}, {"u", 1}, {"d", 2}}, 1},
		{"delete of a missing key", []change{{"d", 9}, {"u", 1}}, 1},
		{"update after delete brings the row back", []change{{"u", 1}, {"d", 1}, {"u", 1}}, 1},
		{"update delete update in one flush", []change{{"u", 1}, {"d", 1}, {"u", 1}, {"u", 2}}, 10},
		{"update then delete in one flush", []change{{"u", 1}, {"u", 1}, {"d", 1}, {"u", 2}}, 10},
		{"churn", churn(400, 23), 37},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := newDB(t)
			s := newTestSink(t, deleteConfig(t, dsn))
			cp := &checkpointStore{seq: map[string]int64{}}
			if !runPartition(t, s, cp, "0", changeEvents("0", 0, tt.changes...), tt.batch, nil) {
				t.Fatal("run did not complete")
			}
			wantTable(t, dsn, wantState(tt.changes))
			if got, _ := cp.get("0"); got != int64(len(tt.changes)-1) {
				t.Fatalf("checkpoint %d, want %d", got, len(tt.changes)-1)
			}
		})
	}
}

// TestReplayedUpdateDoesNotResurrect applies a churn of changes, then
// loses the watermark and replays older ranges: the ordering guard and
// the tombstones must keep every deleted key deleted and every row at its
// newest version, whatever prefix is replayed.
func TestReplayedUpdateDoesNotResurrect(t *testing.T) {
	changes := churn(300, 17)
	want := wantState(changes)
	dsn := newDB(t)
	s := newTestSink(t, deleteConfig(t, dsn))
	events := changeEvents("0", 0, changes...)
	if !runPartition(t, s, &checkpointStore{seq: map[string]int64{}}, "0", events, 40, nil) {
		t.Fatal("run did not complete")
	}
	wantTable(t, dsn, want)
	resurrectable := 0
	for k := range wantState(changes[:150]) {
		if _, live := want[k]; !live {
			resurrectable++
		}
	}
	if resurrectable == 0 {
		t.Fatal("the churn has no key updated in the first half and deleted later: the test proves nothing")
	}
	for _, upto := range []int{150, 299} {
		execSQL(t, dsn, `DELETE FROM ehsink_watermarks`)
		if !runPartition(t, s, &checkpointStore{seq: map[string]int64{}}, "0", events[:upto+1], 25, nil) {
			t.Fatal("replay did not complete")
		}
		wantTable(t, dsn, want)
	}
}

// TestDeleteCrashAtEachStep crashes the third flush of a deleting
// connector at each step of the commit, restarts from the checkpoint,
// and wants exactly the table of a clean run.
func TestDeleteCrashAtEachStep(t *testing.T) {
	changes := churn(300, 13)
	events := changeEvents("0", 0, changes...)
	for _, point := range []string{faultBeforeCopy, faultBeforeCommit, "after-commit", "checkpoint"} {
		t.Run(point, func(t *testing.T) {
			dsn := newDB(t)
			cfg := deleteConfig(t, dsn)
			crashAndRestart(t, cfg, &checkpointStore{seq: map[string]int64{}}, events, point)
			wantTable(t, dsn, wantState(changes))
		})
	}
}

// TestDeleteAcrossPartitions: a key's versions in two partitions (whose
// sequence numbers do not compare) take the last write, deletes included.
func TestDeleteAcrossPartitions(t *testing.T) {
	dsn := newDB(t)
	s := newTestSink(t, deleteConfig(t, dsn))
	cp := &checkpointStore{seq: map[string]int64{}}
	// Partition 1 deletes k1 at seq 0; partition 0 then writes it at seq 5.
	runPartition(t, s, cp, "0", changeEvents("0", 4, change{"u", 1}), 10, nil)
	runPartition(t, s, cp, "1", changeEvents("1", 0, change{"d", 1}), 10, nil)
	wantTable(t, dsn, map[string]int64{})
	runPartition(t, s, cp, "0", changeEvents("0", 4, change{"u", 1}, change{"u", 1}), 10, nil)
	wantTable(t, dsn, map[string]int64{"k1": 5})
}

// TestRefusedDelete: a delete the server refuses (a foreign key without
// ON DELETE) is dead-lettered alone; the rows around it commit.
func TestRefusedDelete(t *testing.T) {
	dsn := newDB(t)
	s := newTestSink(t, deleteConfig(t, dsn))
	execSQL(t, dsn, `CREATE TABLE child (id text REFERENCES public.kv (id))`)
	cp := &checkpointStore{seq: map[string]int64{}}
	runPartition(t, s, cp, "0", changeEvents("0", 0, change{"u", 1}, change{"u", 2}), 10, nil)
	execSQL(t, dsn, `INSERT INTO child VALUES ('k1')`)
	runPartition(t, s, cp, "0", changeEvents("0", 2, change{"d", 1}, change{"d", 2}, change{"u", 3}), 10, nil)
	wantTable(t, dsn, map[string]int64{"k1": 0, "k3": 4})
	got := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_dead_letters WHERE reason LIKE '%foreign key%'`)
	if !slices.Equal(got, []int64{2}) {
		t.Fatalf("dead letters for a refused delete: %v, want [2]", got)
	}
}

// TestTombstoneCleanup: a flush deletes tombstones older than the
// retention and keeps the newer ones.
func TestTombstoneCleanup(t *testing.T) {
	dsn := newDB(t)
	cfg := deleteConfig(t, dsn)
	cfg.TombstoneRetention = time.Hour
	s := newTestSink(t, cfg)
	execSQL(t, dsn, `INSERT INTO public.ehsink_tombstones_kv (id, _ehsink_partition, _ehsink_seq, deleted_at)
		VALUES ('old', '0', 1, now() - interval '2 hours'), ('recent', '0', 2, now() - interval '30 minutes')`)
	runPartition(t, s, &checkpointStore{seq: map[string]int64{}}, "0", changeEvents("0", 10, change{"d", 1}), 10, nil)
	got := queryInts(t, dsn, `SELECT _ehsink_seq FROM public.ehsink_tombstones_kv ORDER BY _ehsink_seq`)
	if !slices.Equal(got, []int64{2, 10}) {
		t.Fatalf("tombstones after a cleanup hold seqs %v, want [2 10] (the 2-hour-old one gone)", got)
	}
}

// TestSkippedEventsMoveTheWatermark: a Debezium tombstone writes nothing
// and is no dead letter, and a flush of nothing else still commits the
// watermark past it.
func TestSkippedEventsMoveTheWatermark(t *testing.T) {
	dsn := newDB(t)
	cfg := deleteConfig(t, dsn)
	cfg.Delete, cfg.Format = nil, cdc.FormatDebezium
	s := newTestSink(t, cfg)
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	evs := []sinks.Event{
		{Partition: "0", SequenceNumber: 0, Offset: "0", Body: []byte(`{"op": "c", "after": {"id": "k1", "v": 7}}`)},
		{Partition: "0", SequenceNumber: 1, Offset: "10", Body: []byte(`{"op": "d", "before": {"id": "k1"}}`)},
		{Partition: "0", SequenceNumber: 2, Offset: "20", Body: nil},
	}
	for i, ev := range evs {
		if err := w.Write(ctx, []sinks.Event{ev}); err != nil {
			t.Fatal(err)
		}
		pos, err := w.Flush(ctx)
		if err != nil || pos == nil || pos.SequenceNumber != int64(i) {
			t.Fatalf("flush %d: %v %v, want the watermark at %d", i, pos, err, i)
		}
	}
	wantTable(t, dsn, map[string]int64{})
	if n := queryInts(t, dsn, `SELECT count(*) FROM ehsink_dead_letters`); n[0] != 0 {
		t.Fatalf("%d dead letters, want none", n[0])
	}
	var be *sinks.BatchError
	if err := w.Write(ctx, []sinks.Event{{Partition: "0", SequenceNumber: 3, Body: []byte(`{"op": "t"}`)}}); !errors.As(err, &be) {
		t.Fatalf("a truncate: %v, want a BatchError", err)
	}
}

// TestCleanupClock: one cleanup per interval, claimed by one caller.
func TestCleanupClock(t *testing.T) {
	var c cleanupClock
	t0 := time.Unix(1_800_000_000, 0)
	steps := []struct {
		at   time.Duration
		want bool
	}{{0, true}, {0, false}, {30 * time.Minute, false}, {time.Hour, true}, {time.Hour + time.Second, false}, {3 * time.Hour, true}}
	for _, s := range steps {
		if got := c.due(t0.Add(s.at), time.Hour); got != s.want {
			t.Fatalf("due at +%v = %t, want %t", s.at, got, s.want)
		}
	}
}
