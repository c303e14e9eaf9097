package postgres

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
)

var testInfo = sinks.Info{Connector: "orders", Namespace: "ns.example", EventHub: "orders", ConsumerGroup: "$Default"}

func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newDB returns a DSN to a fresh database on the shared server.
func newDB(t testing.TB) string {
	t.Helper()
	return testenv.Postgres(t).NewDatabase(t)
}

func execSQL(t testing.TB, dsn string, sql string, args ...any) {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInts(t testing.TB, dsn string, sql string, args ...any) []int64 {
	t.Helper()
	ctx := testCtx(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// kitColumns maps sinktest.Event bodies.
func kitColumns(t testing.TB) mapping.Columns {
	t.Helper()
	var cs mapping.Columns
	err := cs.UnmarshalConfig([]any{
		map[string]any{"name": "id", "from": "$.id", "nullable": false},
		map[string]any{"name": "seq", "from": "$.seq", "type": "bigint"},
		map[string]any{"name": "customer", "from": "$.customer"},
		map[string]any{"name": "amount", "from": "$.amount", "type": "numeric(12,2)"},
		map[string]any{"name": "ts", "from": "$.ts", "type": "timestamptz"},
		map[string]any{"name": "part", "from": "@partition"},
		map[string]any{"name": "enqueued", "from": "@enqueued_time"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// appendTable creates the append-mode table of the kit's events; rid keeps
// the storage order.
const appendTable = `CREATE TABLE orders (rid bigserial, id text NOT NULL, seq bigint, customer text,
	amount numeric(12,2), ts timestamptz, part text NOT NULL, enqueued timestamptz NOT NULL)`

func appendConfig(t testing.TB, dsn string) *sinkConfig {
	t.Helper()
	return &sinkConfig{DSN: secret.String(dsn), Table: "orders", Mode: modeAppend, Columns: kitColumns(t), PoolSize: 2}
}

func upsertConfig(t testing.TB, dsn string) *sinkConfig {
	t.Helper()
	return &sinkConfig{DSN: secret.String(dsn), Table: "public.latest", Mode: modeUpsert, Key: []string{"customer"},
		Columns: kitColumns(t), CreateTable: true, PoolSize: 2}
}

func newTestSink(t testing.TB, cfg *sinkConfig) *sink {
	t.Helper()
	s, err := newPostgresSink(testCtx(t), cfg, testInfo)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// checkpointStore stands in for the runner's checkpoint store.
type checkpointStore struct{ seq map[string]int64 }

func (c *checkpointStore) get(p string) (int64, bool) { s, ok := c.seq[p]; return s, ok }

// runPartition drives a writer the way the runner does: Open, resume from
// the later of the checkpoint and the sink's watermark, drop what the sink
// holds, Write and Flush in batches, checkpoint what Flush returns. crash,
// when set, is consulted after each flush ("after-commit") and while
// checkpointing ("checkpoint"): returning true stops the run there, as a
// crash would. It returns whether the run completed.
func runPartition(t *testing.T, s *sink, cp *checkpointStore, partition string, events []sinks.Event, batch int, crash func(point string, flushes int) bool) bool {
	t.Helper()
	ctx := testCtx(t)
	w, wm, err := s.Open(ctx, partition)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer w.Close(ctx)
	start := int64(0)
	if seq, ok := cp.get(partition); ok {
		start = seq + 1
	}
	if wm != nil && wm.SequenceNumber+1 > start {
		start = wm.SequenceNumber + 1
	}
	var todo []sinks.Event
	for _, ev := range events {
		if ev.SequenceNumber >= start {
			todo = append(todo, ev)
		}
	}
	todo = dedupe.After(todo, wm)
	flushes := 0
	for len(todo) > 0 {
		n := min(batch, len(todo))
		b := todo[:n]
		todo = todo[n:]
		if err := w.Write(ctx, b); err != nil {
			var be *sinks.BatchError
			if !errors.As(err, &be) {
				t.Fatalf("Write: %v", err)
			}
			dl := w.(sinks.DeadLetterer)
			var letters []sinks.DeadLetter
			for _, f := range be.Failed {
				letters = append(letters, sinks.DeadLetter{Event: b[f.Index], Reason: f.Err.Error(), FailedAt: time.Now()})
			}
			if err := dl.DeadLetter(ctx, letters); err != nil {
				t.Fatalf("DeadLetter: %v", err)
			}
		}
		pos, err := w.Flush(ctx)
		for rounds := 0; err != nil && rounds <= n; rounds++ {
			// Rows the server refused: dead-letter them and flush again,
			// as the runner does.
			var rej *sinks.RejectedError
			if !errors.As(err, &rej) {
				break
			}
			var letters []sinks.DeadLetter
			for _, r := range rej.Rejected {
				letters = append(letters, sinks.DeadLetter{Event: r.Event, Reason: r.Err.Error(), FailedAt: time.Now()})
			}
			if err := w.(sinks.DeadLetterer).DeadLetter(ctx, letters); err != nil {
				t.Fatalf("DeadLetter: %v", err)
			}
			pos, err = w.Flush(ctx)
		}
		if err != nil {
			if errors.Is(err, errCrash) {
				return false
			}
			t.Fatalf("Flush: %v", err)
		}
		flushes++
		if crash != nil && crash("after-commit", flushes) {
			return false
		}
		if crash != nil && crash("checkpoint", flushes) {
			return false // the checkpoint write never landed
		}
		if pos != nil {
			cp.seq[partition] = pos.SequenceNumber
		}
	}
	return true
}

var errCrash = errors.New("injected crash")

func seqRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func wantExactlyOnce(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	slices.Sort(got)
	if want := seqRange(from, to); !slices.Equal(got, want) {
		seen := map[int64]int{}
		for _, s := range got {
			seen[s]++
		}
		var dup, miss []int64
		for s, n := range seen {
			if n > 1 {
				dup = append(dup, s)
			}
		}
		for _, s := range want {
			if seen[s] == 0 {
				miss = append(miss, s)
			}
		}
		slices.Sort(dup)
		slices.Sort(miss)
		t.Fatalf("%d rows for %d events: duplicates %v, missing %v", len(got), len(want), head(dup), head(miss))
	}
}

func head(s []int64) string {
	if len(s) > 10 {
		return fmt.Sprint(s[:10]) + "..."
	}
	return fmt.Sprint(s)
}

func newConn(ctx context.Context, dsn string) (*pgx.Conn, error) { return pgx.Connect(ctx, dsn) }

// crashAndRestart runs events through a sink of cfg in batches of 50,
// crashes the third flush at point (a fault point of the commit, or
// "after-commit" or "checkpoint" of runPartition), checks the crash took,
// then runs a new sink from the checkpoint to the end.
func crashAndRestart(t *testing.T, cfg *sinkConfig, cp *checkpointStore, events []sinks.Event, point string) {
	t.Helper()
	s1 := newTestSink(t, cfg)
	calls := 0
	s1.faults = func(p string) error {
		if p == point {
			if calls++; calls == 3 {
				return errCrash
			}
		}
		return nil
	}
	crashed := false
	done := runPartition(t, s1, cp, "0", events, 50, func(p string, flushes int) bool {
		if p == point && flushes == 3 {
			crashed = true
			return true
		}
		return false
	})
	if done || (calls < 3 && !crashed) {
		t.Fatalf("the crash at %s was not injected", point)
	}
	s1.Close(context.Background())
	if got, _ := cp.get("0"); got != 99 {
		t.Fatalf("checkpoint after the crash = %d, want 99 (two flushes of 50)", got)
	}
	s2 := newTestSink(t, cfg)
	if !runPartition(t, s2, cp, "0", events, 50, nil) {
		t.Fatal("restart did not complete")
	}
	if got, _ := cp.get("0"); got != events[len(events)-1].SequenceNumber {
		t.Fatalf("checkpoint after restart = %d, want %d", got, events[len(events)-1].SequenceNumber)
	}
}
