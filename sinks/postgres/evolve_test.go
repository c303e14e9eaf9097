package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// firstColumns is kitColumns before the mapping grew: id, seq, customer.
func firstColumns(t testing.TB) *sinkConfig {
	t.Helper()
	return &sinkConfig{Columns: kitColumns(t)[:3]}
}

// TestEvolveAddsMappedColumns: a table made by a first config, then a
// sink whose mapping has four more columns; the sink adds them (nullable,
// logged) at start, the new rows carry them and the old rows hold NULL.
// Without evolveColumns the second sink does not start ("not in the
// table").
func TestEvolveAddsMappedColumns(t *testing.T) {
	for _, mode := range []string{modeAppend, modeUpsert} {
		t.Run(mode, func(t *testing.T) {
			dsn := newDB(t)
			cfg := appendConfig(t, dsn)
			cfg.CreateTable = true
			if mode == modeUpsert {
				cfg = upsertConfig(t, dsn)
			}
			grown := *cfg
			cfg.Columns = firstColumns(t).Columns
			cp := &checkpointStore{seq: map[string]int64{}}
			runPartition(t, newTestSink(t, cfg), cp, "0", sinktest.Events("0", 0, 9), 10, nil)

			var logs bytes.Buffer
			info := testInfo
			info.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			s, err := newPostgresSink(testCtx(t), &grown, info)
			if err != nil {
				t.Fatalf("New with the grown mapping: %v", err)
			}
			t.Cleanup(func() { s.Close(context.Background()) })
			if !runPartition(t, s, cp, "0", sinktest.Events("0", 10, 19), 10, nil) {
				t.Fatal("run did not complete")
			}
			table := s.routes[0].static.target.Sanitize()
			for _, col := range []string{"amount", "ts", "part", "enqueued"} {
				if !strings.Contains(logs.String(), "msg=\"added column\" table="+cfg.Table+" column="+col) {
					t.Errorf("no INFO line for column %s:\n%s", col, logs.String())
				}
				if n := queryInts(t, dsn, `SELECT count(*) FROM pg_attribute WHERE attrelid = $1::regclass AND attname = $2 AND NOT attnotnull`, table, col); n[0] != 1 {
					t.Errorf("column %s: %d nullable columns of that name, want 1", col, n[0])
				}
			}
			if mode == modeUpsert {
				// Events 10-19 wrote every key (seq % 7) again.
				if n := queryInts(t, dsn, `SELECT count(*) FROM `+table+` WHERE amount = seq % 1000 + 0.25 AND part = '0'`); n[0] != 7 {
					t.Errorf("%d rows carry the new columns, want the 7 keys", n[0])
				}
				return
			}
			wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM `+table), 0, 19)
			if got := queryInts(t, dsn, `SELECT seq FROM `+table+` WHERE amount IS NULL AND ts IS NULL AND part IS NULL ORDER BY seq`); !slices.Equal(got, seqRange(0, 9)) {
				t.Errorf("rows without the new columns: %v, want 0-9", got)
			}
			if got := queryInts(t, dsn, `SELECT seq FROM `+table+` WHERE amount = seq % 1000 + 0.25 AND part = '0' AND enqueued IS NOT NULL ORDER BY seq`); !slices.Equal(got, seqRange(10, 19)) {
				t.Errorf("rows with the new columns: %v, want 10-19", got)
			}
		})
	}
}

// TestEvolveRoutes: a routed connector's literal and templated tables get
// the columns their routes' mappings gained.
func TestEvolveRoutes(t *testing.T) {
	dsn := newDB(t)
	routes := func(cols map[string]any) *sinkConfig {
		c := mustCols(t, cols)
		return &sinkConfig{DSN: secret.String(dsn), PoolSize: 2, CreateTable: true, Routes: []routeConfig{
			{Name: "beats", When: `$.kind == 'beat'`, Table: "beats", Columns: c},
			{Name: "by kind", Table: "ev_{$.kind}", Columns: c},
		}}
	}
	events := func(from int64, bodies ...string) []sinks.Event {
		var out []sinks.Event
		for i, b := range bodies {
			ev := sinktest.Event("0", from+int64(i))
			ev.Body = []byte(b)
			out = append(out, ev)
		}
		return out
	}
	cp := &checkpointStore{seq: map[string]int64{}}
	first := routes(map[string]any{"id": "$.id", "kind": "$.kind"})
	runPartition(t, newTestSink(t, first), cp, "0", events(0, `{"id":"1","kind":"beat"}`, `{"id":"2","kind":"a"}`), 2, nil)

	grown := routes(map[string]any{"id": "$.id", "kind": "$.kind", "note": "$.note"})
	if !runPartition(t, newTestSink(t, grown), cp, "0", events(2, `{"id":"3","kind":"beat","note":"n3"}`, `{"id":"4","kind":"a","note":"n4"}`), 2, nil) {
		t.Fatal("run did not complete")
	}
	for _, table := range []string{"beats", "ev_a"} {
		if n := queryInts(t, dsn, `SELECT count(*) FROM `+table+` WHERE note IS NULL`); n[0] != 1 {
			t.Errorf("%s: %d rows without a note, want the first one", table, n[0])
		}
		if n := queryInts(t, dsn, `SELECT count(*) FROM `+table+` WHERE note = 'n' || id`); n[0] != 1 {
			t.Errorf("%s: %d rows with their note, want the second one", table, n[0])
		}
	}
	if n := queryInts(t, dsn, `SELECT count(*) FROM ehsink_dead_letters`); n[0] != 0 {
		t.Errorf("%d dead letters, want none", n[0])
	}
}

// TestEvolveReplicasRace: two sinks of the grown mapping start together on
// one table that a reader holds, so that both are waiting, then the reader
// lets go; both start and the table has each column once. The second to
// get lockSchema's lock finds the columns there; without that lock, ADD
// COLUMN IF NOT EXISTS still makes the second ALTER a no-op; with neither,
// the second replica fails ("column already exists").
func TestEvolveReplicasRace(t *testing.T) {
	ctx := testCtx(t)
	dsn := newDB(t)
	cfg := appendConfig(t, dsn)
	cfg.CreateTable = true
	grown := *cfg
	cfg.Columns = firstColumns(t).Columns
	newTestSink(t, cfg).Close(context.Background())

	reader, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close(context.WithoutCancel(ctx))
	tx, err := reader.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `LOCK TABLE orders IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() {
			s, err := newPostgresSink(ctx, &grown, testInfo)
			if err == nil {
				s.Close(context.Background())
			}
			errs[i] = err
		})
	}
	// Both wait, one for the table (its ALTER), the other for the table
	// or for lockSchema's lock; another session looks, as the reader's
	// transaction would see one snapshot of the statistics throughout.
	watch, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(context.WithoutCancel(ctx))
	for waiting := 0; waiting < 2; {
		err := watch.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'ehsink' AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatalf("waiting for both replicas to wait: %v", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
	if n := queryInts(t, dsn, `SELECT count(*) FROM pg_attribute WHERE attrelid = 'orders'::regclass AND attnum > 0 AND NOT attisdropped`); n[0] != int64(len(grown.Columns)) {
		t.Errorf("the table has %d columns, want %d", n[0], len(grown.Columns))
	}
}
