package postgres

import (
	"errors"

	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// routedConfig sends the kit's events of customers c-0..c-2 to table
// low and the others to table high, in mode.
func routedConfig(t testing.TB, dsn, mode string) *sinkConfig {
	t.Helper()
	cfg := &sinkConfig{DSN: secret.String(dsn), Mode: mode, CreateTable: true, PoolSize: 2, Routes: []routeConfig{
		{Name: "low", When: `$.customer in ['c-0', 'c-1', 'c-2']`, Table: "low", Columns: kitColumns(t)},
		{Table: "public.high", Columns: kitColumns(t)},
	}}
	if mode == modeUpsert {
		for i := range cfg.Routes {
			cfg.Routes[i].Key = []string{"customer"}
		}
	}
	return cfg
}

func lowCustomer(seq int64) bool { return seq%7 <= 2 }

func TestRoutedConfigValidate(t *testing.T) {
	cols := kitColumns(t)
	cases := []struct {
		name string
		cfg  sinkConfig
		want []string // field paths with a problem
	}{
		{"valid", sinkConfig{DSN: "postgres://x@h/db", Routes: []routeConfig{
			{When: `$.type == 'a'`, Table: "a", Columns: cols}, {Table: "events_{$.type}", Columns: cols}}}, nil},
		{"sink-level table with routes", sinkConfig{DSN: "postgres://x@h/db", Table: "t", Columns: cols,
			Routes: []routeConfig{{Table: "a", Columns: cols}}}, []string{"table", "columns"}},
		{"bad condition", sinkConfig{DSN: "postgres://x@h/db", Routes: []routeConfig{
			{When: `$.type = 'a'`, Table: "a", Columns: cols}, {Table: "b", Columns: cols}}}, []string{"routes[0].when"}},
		{"unreachable after the default", sinkConfig{DSN: "postgres://x@h/db", Routes: []routeConfig{
			{Table: "a", Columns: cols}, {When: `$.type == 'b'`, Table: "b", Columns: cols}}}, []string{"routes[1].when"}},
		{"route problems", sinkConfig{DSN: "postgres://x@h/db", Mode: modeUpsert, Routes: []routeConfig{
			{When: `$.a == 1`, Table: "", Columns: cols}, {Table: "t_{$.x", Key: []string{"nope"}}}},
			[]string{"routes[0].table", "routes[0].key", "routes[1].table", "routes[1].key[0]", "routes[1].columns"}},
		{"negative max_tables", sinkConfig{DSN: "postgres://x@h/db", Routes: []routeConfig{
			{Table: "t_{$.x}", Columns: cols, MaxTables: -1}}}, []string{"routes[0].max_tables"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			var got []string
			for _, e := range flatten(err) {
				var fe *sinks.FieldError
				if errors.As(e, &fe) {
					got = append(got, fe.Field)
				} else if e != nil {
					t.Errorf("problem without a field: %v", e)
				}
			}
			for _, w := range tc.want {
				if !slices.Contains(got, w) {
					t.Errorf("want a problem at %s; got %v (%v)", w, got, err)
				}
			}
			if len(tc.want) == 0 && err != nil {
				t.Errorf("want no problem, got %v", err)
			}
		})
	}
}

// TestRoutedCrashAtEachStep is TestCrashAtEachStep for a connector with
// two tables: the crash at each step leaves each table exactly the rows a
// clean run leaves, and one watermark row per partition covers both.
func TestRoutedCrashAtEachStep(t *testing.T) {
	const last = 299
	events := sinktest.Events("0", 0, last)
	for _, mode := range []string{modeAppend, modeUpsert} {
		for _, point := range []string{faultBeforeCopy, faultBeforeCommit, "after-commit", "checkpoint"} {
			t.Run(mode+"/"+point, func(t *testing.T) {
				dsn := newDB(t)
				cfg := routedConfig(t, dsn, mode)
				crashAndRestart(t, cfg, &checkpointStore{seq: map[string]int64{}}, events, point)
				wantRouted(t, dsn, mode, last)
				if n := queryInts(t, dsn, `SELECT count(*) FROM ehsink_watermarks WHERE table_name = '*' AND sequence_number = $1`, int64(last)); n[0] != 1 {
					t.Fatalf("%d watermark rows at %d for the routed connector, want 1", n[0], last)
				}
			})
		}
	}
}

// wantRouted checks tables low and high against the kit's events 0..last
// routed by routedConfig.
func wantRouted(t *testing.T, dsn, mode string, last int64) {
	t.Helper()
	var low, high []int64
	for seq := int64(0); seq <= last; seq++ {
		if mode == modeUpsert && seq+7 <= last {
			continue // not the newest of its key
		}
		if lowCustomer(seq) {
			low = append(low, seq)
		} else {
			high = append(high, seq)
		}
	}
	for table, want := range map[string][]int64{"low": low, "high": high} {
		got := queryInts(t, dsn, `SELECT seq FROM `+table+` ORDER BY seq`)
		if !slices.Equal(got, want) {
			t.Fatalf("table %s holds %d rows %s, want %d %s", table, len(got), head(got), len(want), head(want))
		}
	}
}

// TestRoutedTemplatedTables routes by a template: tables that exist or are
// created take their events; an event naming a missing table (without
// create_table), an invalid name, more tables than max_tables, or no route
// at all is a dead letter with the reason, committed with the rows.
func TestRoutedTemplatedTables(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, `CREATE TABLE ev_a (id text, kind text)`)
	execSQL(t, dsn, `CREATE TABLE ev_b (id text, kind text)`)
	execSQL(t, dsn, `CREATE TABLE ev_c (id text, kind text)`)
	cols := mustCols(t, map[string]any{"id": "$.id", "kind": "$.kind"})
	cfg := &sinkConfig{DSN: secret.String(dsn), PoolSize: 2, Routes: []routeConfig{
		{Name: "skip", When: `$.kind == 'heartbeat'`, Table: "beats", Columns: cols},
		{Name: "by kind", When: `exists($.kind)`, Table: "ev_{$.kind}", Columns: cols, MaxTables: 3},
	}}
	execSQL(t, dsn, `CREATE TABLE beats (id text, kind text)`)
	s := newTestSink(t, cfg)
	bodies := []string{
		`{"id":"1","kind":"a"}`, `{"id":"2","kind":"b"}`, `{"id":"3","kind":"heartbeat"}`,
		`{"id":"4","kind":"zz"}`,      // no table ev_zz: counts against max_tables
		`{"id":"5","kind":"a; drop"}`, // not an identifier
		`{"id":"6"}`,                  // no route
		`{"id":"7","kind":"c"}`,       // ev_c exists, but max_tables (a, b, zz) is reached
		`{"id":"8","kind":"a"}`,
		`not json`,
	}
	wantDead := map[int64]string{
		3: "ev_zz: does not exist", 4: "not an identifier", 5: "no route takes the event",
		6: "past max_tables 3", 8: "invalid JSON",
	}
	var events []sinks.Event
	for i, b := range bodies {
		ev := sinktest.Event("0", int64(i))
		ev.Body = []byte(b)
		events = append(events, ev)
	}
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, s, cp, "0", events, len(events), nil) {
		t.Fatal("run did not complete")
	}
	for table, want := range map[string][]int64{"ev_a": {1, 8}, "ev_b": {2}, "beats": {3}, "ev_c": nil} {
		got := queryInts(t, dsn, `SELECT id::bigint FROM `+table+` ORDER BY id`)
		if !slices.Equal(got, want) {
			t.Errorf("table %s holds ids %v, want %v", table, got, want)
		}
	}
	ctx := testCtx(t)
	conn, err := newConn(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT sequence_number, table_name, reason FROM ehsink_dead_letters ORDER BY sequence_number`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int64]string{}
	for rows.Next() {
		var seq int64
		var table, reason string
		if err := rows.Scan(&seq, &table, &reason); err != nil {
			t.Fatal(err)
		}
		if table != "*" {
			t.Errorf("dead letter %d has table_name %q, want *", seq, table)
		}
		got[seq] = reason
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wantDead) {
		t.Errorf("dead letters %v, want seqs %v", got, wantDead)
	}
	for seq, want := range wantDead {
		if !strings.Contains(got[seq], want) {
			t.Errorf("dead letter %d: reason %q, want it to contain %q", seq, got[seq], want)
		}
	}
	if wm := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_watermarks WHERE table_name = '*'`); !slices.Equal(wm, []int64{8}) {
		t.Errorf("watermarks %v, want [8]", wm)
	}
}

// TestRoutedRefusedRowNamesTable: a row one table refuses is dead-lettered
// with its table in the reason; the other table's rows of the flush commit.
func TestRoutedRefusedRowNamesTable(t *testing.T) {
	dsn := newDB(t)
	cfg := routedConfig(t, dsn, modeAppend)
	execSQL(t, dsn, `CREATE TABLE high (id text NOT NULL, seq bigint, customer text, amount numeric(12,2) CHECK (amount >= 0),
		ts timestamptz, part text NOT NULL, enqueued timestamptz NOT NULL)`)
	s := newTestSink(t, cfg)
	events := sinktest.Events("0", 0, 99)
	const bad = 45 // customer c-3: table high
	events[bad].Body = []byte(strings.Replace(string(events[bad].Body), `"amount":`, `"amount":-1,"x":`, 1))
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, s, cp, "0", events, 30, nil) {
		t.Fatal("run did not complete")
	}
	var all []int64
	all = append(all, queryInts(t, dsn, `SELECT seq FROM low`)...)
	all = append(all, queryInts(t, dsn, `SELECT seq FROM high`)...)
	all = append(all, queryInts(t, dsn, `SELECT sequence_number FROM ehsink_dead_letters WHERE reason LIKE 'table public.high: refused by PostgreSQL%amount%'`)...)
	wantExactlyOnce(t, all, 0, 99)
}

func mustCols(t testing.TB, m map[string]any) mapping.Columns {
	t.Helper()
	var cs mapping.Columns
	if err := cs.UnmarshalConfig(m); err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestRoutedConformance runs the conformance kit on a routed connector
// (two tables, append and upsert): restarts, replays, two owners at once
// and dead letters hold across both tables.
func TestRoutedConformance(t *testing.T) {
	for _, mode := range []string{modeAppend, modeUpsert} {
		t.Run(mode, func(t *testing.T) {
			dsns := map[string]string{}
			var mu sync.Mutex
			dsnFor := func(t *testing.T) string {
				mu.Lock()
				defer mu.Unlock()
				if dsns[t.Name()] == "" {
					dsns[t.Name()] = newDB(t)
				}
				return dsns[t.Name()]
			}
			sinktest.Run(t, sinktest.Harness{
				New: func(t *testing.T) sinks.Sink {
					cfg := routedConfig(t, dsnFor(t), mode)
					for i := range cfg.Routes {
						if mode == modeUpsert {
							cfg.Routes[i].Key = []string{"id"} // one row per event, so every seq is visible
						}
					}
					return newTestSink(t, cfg)
				},
				Committed: func(t *testing.T, partition string) []int64 {
					seqs := queryInts(t, dsnFor(t), `SELECT seq FROM low WHERE part = $1 UNION ALL SELECT seq FROM high WHERE part = $1`, partition)
					slices.Sort(seqs)
					return seqs
				},
				BadEvent: func(partition string, seq int64) sinks.Event {
					ev := sinktest.Event(partition, seq)
					ev.Body = []byte(strings.Replace(string(ev.Body), `"amount":`, `"amount":"abc","x":`, 1))
					return ev
				},
				Fencing: true,
			})
		})
	}
}

// TestRoutedTableOfTwoRoutes: a templated table that names another route's
// table is a dead letter, not a second mapping into the same table.
func TestRoutedTableOfTwoRoutes(t *testing.T) {
	dsn := newDB(t)
	cols := mustCols(t, map[string]any{"id": "$.id", "kind": "$.kind"})
	cfg := &sinkConfig{DSN: secret.String(dsn), PoolSize: 1, CreateTable: true, Routes: []routeConfig{
		{Name: "fixed", When: `$.kind == 'fixed'`, Table: "ev_a", Columns: cols},
		{Name: "by kind", Table: "ev_{$.kind}", Columns: cols},
	}}
	s := newTestSink(t, cfg)
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	ev := sinktest.Event("0", 0)
	ev.Body = []byte(`{"id":"1","kind":"a"}`)
	var be *sinks.BatchError
	if err := w.Write(ctx, []sinks.Event{ev}); !errors.As(err, &be) || !strings.Contains(be.Failed[0].Err.Error(), "table ev_a is written by route fixed") {
		t.Fatalf("Write = %v, want the event refused for naming route fixed's table", err)
	}
}
