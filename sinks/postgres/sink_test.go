package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

func TestRegistered(t *testing.T) {
	d, err := (*sinks.Registry)(nil).Lookup("postgres") // nil: the drivers sinks.Register added
	if err != nil {
		t.Fatal(err)
	}
	cfg, ok := d.NewConfig().(*sinkConfig)
	if !ok || cfg.Mode != modeAppend || cfg.PoolSize != defaultPoolSize {
		t.Fatalf("NewConfig() = %#v", d.NewConfig())
	}
}

func TestConfigValidate(t *testing.T) {
	good := func() *sinkConfig { return appendConfig(t, "postgres://u:hunter2@localhost/db?sslmode=disable") }
	tests := []struct {
		name   string
		change func(c *sinkConfig)
		fields []string
	}{
		{"valid", func(c *sinkConfig) {}, nil},
		{"keyword dsn", func(c *sinkConfig) { c.DSN = "host=localhost dbname=db password=hunter2 sslmode=require" }, nil},
		{"missing dsn and table", func(c *sinkConfig) { c.DSN, c.Table = "", "" }, []string{"dsn", "table"}},
		{"bad dsn", func(c *sinkConfig) { c.DSN = "postgres://u:hunter2@[::1" }, []string{"dsn"}},
		{"bad table", func(c *sinkConfig) { c.Table = "a.b.c" }, []string{"table"}},
		{"bad mode", func(c *sinkConfig) { c.Mode = "merge" }, []string{"mode"}},
		{"key in append", func(c *sinkConfig) { c.Key = []string{"id"} }, []string{"key"}},
		{"upsert without key", func(c *sinkConfig) { c.Mode = modeUpsert }, []string{"key"}},
		{"upsert unknown key", func(c *sinkConfig) { c.Mode, c.Key = modeUpsert, []string{"nope"} }, []string{"key[0]"}},
		{"no columns", func(c *sinkConfig) { c.Columns = nil }, []string{"columns"}},
		{"reserved column", func(c *sinkConfig) { c.Columns[0].Name = "_ehsink_x" }, []string{"columns._ehsink_x"}},
		{"negative pool", func(c *sinkConfig) { c.PoolSize = -1 }, []string{"pool_size"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.change(c)
			err := c.Validate()
			if len(tt.fields) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: no error")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error shows the password: %v", err)
			}
			for _, f := range tt.fields {
				found := false
				for _, e := range flatten(err) {
					var fe *sinks.FieldError
					if errors.As(e, &fe) && fe.Field == f {
						found = true
					}
				}
				if !found {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
}

func TestIsTransient(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "25P03", Severity: "FATAL"}, true}, // idle-in-transaction timeout
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{fmt.Errorf("copy: %w", syscall.ECONNRESET), true},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), true},
		{io.ErrUnexpectedEOF, true},
		{pgconn.ErrConnClosed, true},
		{&pgconn.PgError{Code: "42501"}, false}, // insufficient_privilege
		{&pgconn.PgError{Code: "42P01"}, false}, // undefined_table
		{&pgconn.PgError{Code: "22P02"}, false}, // invalid_text_representation
		{context.Canceled, false},
		{errors.New("something else"), false},
	}
	for _, tt := range tests {
		if got := isTransient(tt.err); got != tt.want {
			t.Errorf("isTransient(%v) = %v, want %v", tt.err, got, tt.want)
		}
		if got := sinks.IsTransient(classify(tt.err)); got != tt.want {
			t.Errorf("classify(%v) transient = %v, want %v", tt.err, got, tt.want)
		}
	}
	// A server that accepts and never answers (a half-open path at start):
	// the connect's own timeout wraps context.DeadlineExceeded while the
	// caller's ctx is alive, and must be retried, not fail the connector.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = pgconn.Connect(t.Context(), "postgres://u@"+ln.Addr().String()+"/db?sslmode=disable&connect_timeout=1")
	if !errors.Is(err, context.DeadlineExceeded) || !isTransient(err) {
		t.Errorf("connect to a silent server: %v (deadline: %v), transient %v, want a transient deadline", err, errors.Is(err, context.DeadlineExceeded), isTransient(err))
	}
}

// TestConformance runs the team's sink conformance kit in both modes.
func TestConformance(t *testing.T) {
	harness := func(mode string) sinktest.Harness {
		dsns := map[string]string{}
		var mu sync.Mutex
		dsnFor := func(t *testing.T) string {
			// Every case gets its own database, shared by the sinks it starts.
			mu.Lock()
			defer mu.Unlock()
			name := t.Name()
			if dsns[name] == "" {
				dsns[name] = newDB(t)
				if mode == modeAppend {
					execSQL(t, dsns[name], appendTable)
				}
			}
			return dsns[name]
		}
		return sinktest.Harness{
			New: func(t *testing.T) sinks.Sink {
				cfg := appendConfig(t, dsnFor(t))
				if mode == modeUpsert {
					cfg = upsertConfig(t, dsnFor(t))
					cfg.Key = []string{"id"} // one row per event, so every seq is visible
				}
				return newTestSink(t, cfg)
			},
			Committed: func(t *testing.T, partition string) []int64 {
				if mode == modeUpsert {
					return queryInts(t, dsnFor(t), `SELECT seq FROM latest WHERE part = $1 ORDER BY seq`, partition)
				}
				return queryInts(t, dsnFor(t), `SELECT seq FROM orders WHERE part = $1 ORDER BY rid`, partition)
			},
			BadEvent: func(partition string, seq int64) sinks.Event {
				ev := sinktest.Event(partition, seq)
				ev.Body = []byte(strings.Replace(string(ev.Body), `"amount":`, `"amount":"abc","x":`, 1))
				return ev
			},
			Fencing: true,
		}
	}
	for _, mode := range []string{modeAppend, modeUpsert} {
		t.Run(mode, func(t *testing.T) { sinktest.Run(t, harness(mode)) })
	}
}

// TestCrashAtEachStep crashes the third flush at each step of the commit
// protocol, restarts from the last checkpoint, and checks the table holds
// every event once (append) or the newest event per key (upsert).
func TestCrashAtEachStep(t *testing.T) {
	const last = 299
	events := sinktest.Events("0", 0, last)
	for _, mode := range []string{modeAppend, modeUpsert} {
		for _, point := range []string{faultBeforeCopy, faultBeforeCommit, "after-commit", "checkpoint"} {
			t.Run(mode+"/"+point, func(t *testing.T) {
				dsn := newDB(t)
				cfg := upsertConfig(t, dsn)
				if mode == modeAppend {
					execSQL(t, dsn, appendTable)
					cfg = appendConfig(t, dsn)
				}
				crashAndRestart(t, cfg, &checkpointStore{seq: map[string]int64{}}, events, point)
				if mode == modeAppend {
					wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM orders`), 0, last)
					return
				}
				wantNewestPerKey(t, dsn, last)
			})
		}
	}
}

// wantNewestPerKey checks the upsert table against the kit's events 0..last
// keyed by customer (seq % 7).
func wantNewestPerKey(t *testing.T, dsn string, last int64) {
	t.Helper()
	got := queryInts(t, dsn, `SELECT seq FROM latest ORDER BY seq`)
	var want []int64
	for k := int64(0); k < 7; k++ {
		want = append(want, last-((last-k)%7))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("upsert rows hold seqs %v, want the newest per key %v", got, want)
	}
	hidden := queryInts(t, dsn, `SELECT count(*) FROM latest WHERE _ehsink_seq <> seq OR _ehsink_partition <> part`)
	if hidden[0] != 0 {
		t.Fatalf("%d rows whose hidden ordering columns do not match their event", hidden[0])
	}
}

// TestReplayOlderRangeChangesNothing applies 0..199, then replays 0..99:
// through a writer (the watermark drops it) and with the watermark gone
// (only the upsert ordering guard stands in the way). No row may change.
func TestReplayOlderRangeChangesNothing(t *testing.T) {
	dsn := newDB(t)
	s := newTestSink(t, upsertConfig(t, dsn))
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, s, cp, "0", sinktest.Events("0", 0, 199), 40, nil) {
		t.Fatal("run did not complete")
	}
	snapshot := func() string {
		return fmt.Sprint(queryInts(t, dsn, `SELECT seq FROM latest ORDER BY customer`),
			queryInts(t, dsn, `SELECT (extract(epoch FROM ts) * 1000)::bigint FROM latest ORDER BY customer`))
	}
	before := snapshot()

	ctx := testCtx(t)
	w, wm, err := s.Open(ctx, "0")
	if err != nil || wm == nil || wm.SequenceNumber != 199 {
		t.Fatalf("Open = %v, %v; want watermark 199", wm, err)
	}
	if err := w.Write(ctx, sinktest.Events("0", 0, 99)); err != nil {
		t.Fatal(err)
	}
	if pos, err := w.Flush(ctx); err != nil || pos.SequenceNumber != 199 {
		t.Fatalf("Flush of a covered replay = %v, %v; want 199", pos, err)
	}
	w.Close(ctx)
	if after := snapshot(); after != before {
		t.Fatalf("replay through the watermark changed rows:\n%s\n%s", before, after)
	}

	execSQL(t, dsn, `DELETE FROM ehsink_watermarks`)
	w, _, err = s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, sinktest.Events("0", 0, 99)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	w.Close(ctx)
	if after := snapshot(); after != before {
		t.Fatalf("replay without the watermark changed rows (ordering guard):\n%s\n%s", before, after)
	}
	wantNewestPerKey(t, dsn, 199)
}

// TestMalformedEvents sends 1,000 events of which 10 cannot be written: 990
// rows and 10 dead letters with their reasons, in the same commits.
func TestMalformedEvents(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, appendTable)
	s := newTestSink(t, appendConfig(t, dsn))
	events := sinktest.Events("2", 0, 999)
	bad := map[int64]string{}
	breakers := []struct {
		reason string
		apply  func(b string) string
	}{
		{`column "amount"`, func(b string) string { return strings.Replace(b, `"amount":`, `"amount":"abc","x":`, 1) }},
		{"invalid JSON", func(b string) string { return b[:len(b)-1] }},
		{`column "id"`, func(b string) string { return strings.Replace(b, `"id":`, `"idx":`, 1) }},
		{`column "seq"`, func(b string) string { return strings.Replace(b, `"seq":`, `"seq":1.5,"x":`, 1) }},
		{`column "ts"`, func(b string) string { return strings.Replace(b, `"ts":"`, `"ts":"yesterday","x":"`, 1) }},
	}
	for i := range 10 {
		seq := int64(37 + i*97)
		br := breakers[i%len(breakers)]
		events[seq].Body = []byte(br.apply(string(events[seq].Body)))
		bad[seq] = br.reason
	}
	cp := &checkpointStore{seq: map[string]int64{}}
	if !runPartition(t, s, cp, "2", events, 128, nil) {
		t.Fatal("run did not complete")
	}
	rows := queryInts(t, dsn, `SELECT seq FROM orders`)
	if len(rows) != 990 {
		t.Fatalf("%d rows, want 990", len(rows))
	}
	for _, r := range rows {
		if _, isBad := bad[r]; isBad {
			t.Fatalf("malformed event %d was written", r)
		}
	}
	ctx := testCtx(t)
	conn, err := newConn(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	dl, err := conn.Query(ctx, `SELECT sequence_number, reason, body, partition_id, connector FROM ehsink_dead_letters ORDER BY sequence_number`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for dl.Next() {
		var seq int64
		var reason, part, connector string
		var body []byte
		if err := dl.Scan(&seq, &reason, &body, &part, &connector); err != nil {
			t.Fatal(err)
		}
		n++
		want, ok := bad[seq]
		switch {
		case !ok:
			t.Errorf("dead letter for good event %d", seq)
		case !strings.Contains(reason, want):
			t.Errorf("dead letter %d: reason %q does not mention %q", seq, reason, want)
		case string(body) != string(events[seq].Body) || part != "2" || connector != "orders":
			t.Errorf("dead letter %d: body %q partition %s connector %s", seq, body, part, connector)
		}
	}
	if dl.Err() != nil || n != 10 {
		t.Fatalf("%d dead letters (%v), want 10", n, dl.Err())
	}
	if got, _ := cp.get("2"); got != 999 {
		t.Fatalf("checkpoint %d, want 999", got)
	}
}

// TestFencingRace runs two writers of one partition at once, each with
// its own sink (two processes), over the same events in different batch
// sizes: every event is written once, none is missing.
func TestFencingRace(t *testing.T) {
	for _, mode := range []string{modeAppend, modeUpsert} {
		t.Run(mode, func(t *testing.T) {
			dsn := newDB(t)
			cfg := upsertConfig(t, dsn)
			cfg.Key = []string{"id"}
			if mode == modeAppend {
				execSQL(t, dsn, appendTable)
				cfg = appendConfig(t, dsn)
			}
			const last = 1999
			events := sinktest.Events("1", 0, last)
			a, b := newTestSink(t, cfg), newTestSink(t, cfg)
			var wg sync.WaitGroup
			for i, s := range []*sink{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					runPartition(t, s, &checkpointStore{seq: map[string]int64{}}, "1", events, 37+i*26, nil)
				}()
			}
			wg.Wait()
			table := "orders"
			if mode == modeUpsert {
				table = "latest"
			}
			wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM `+table), 0, last)
			if wm := queryInts(t, dsn, `SELECT sequence_number FROM ehsink_watermarks`); len(wm) != 1 || wm[0] != last {
				t.Fatalf("watermarks %v, want [%d]", wm, last)
			}
		})
	}
}

// TestServerOutage stops the server between flushes and in the middle of
// one (after COPY, before COMMIT), checks the failures are transient and
// keep the rows, and that retrying after the restart completes the output
// with no duplicate.
func TestServerOutage(t *testing.T) {
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	execSQL(t, dsn, appendTable)
	s := newTestSink(t, appendConfig(t, dsn))
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)

	stopInFlush := false
	s.faults = func(p string) error {
		if p == faultBeforeCommit && stopInFlush {
			stopInFlush = false
			if err := pg.Stop(); err != nil {
				t.Errorf("stop: %v", err)
			}
		}
		return nil
	}
	events := sinktest.Events("0", 0, 999)
	var lastPos int64 = -1
	for i := 0; i < len(events); i += 100 {
		if err := w.Write(ctx, events[i:i+100]); err != nil {
			t.Fatal(err)
		}
		switch i {
		case 300: // the server goes away between flushes
			if err := pg.Stop(); err != nil {
				t.Fatal(err)
			}
		case 600: // ... and in the middle of one
			stopInFlush = true
		}
		pos, err := w.Flush(ctx)
		if i == 300 || i == 600 {
			if err == nil || !sinks.IsTransient(err) {
				t.Fatalf("Flush with the server down: %v, want a transient error", err)
			}
			if err := pg.Start(); err != nil {
				t.Fatal(err)
			}
			// The runner retries the same Flush; the rows were kept.
			if pos, err = w.Flush(ctx); err != nil {
				t.Fatalf("Flush after restart: %v", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		lastPos = pos.SequenceNumber
	}
	if lastPos != 999 {
		t.Fatalf("last watermark %d, want 999", lastPos)
	}
	wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM orders`), 0, 999)
}

// TestAmbiguousCommitIsSafe simulates a commit whose outcome the writer
// never learned: the transaction committed, the retry finds the watermark
// moved and writes nothing twice.
func TestAmbiguousCommitIsSafe(t *testing.T) {
	dsn := newDB(t)
	execSQL(t, dsn, appendTable)
	s := newTestSink(t, appendConfig(t, dsn))
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, sinktest.Events("0", 0, 49)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, sinktest.Events("0", 50, 99)); err != nil {
		t.Fatal(err)
	}
	// Another process (or this one's lost commit) committed 50..99.
	other := newTestSink(t, appendConfig(t, dsn))
	cp := &checkpointStore{seq: map[string]int64{"0": 49}}
	runPartition(t, other, cp, "0", sinktest.Events("0", 0, 99), 100, nil)
	pos, err := w.Flush(ctx)
	if err != nil || pos.SequenceNumber != 99 {
		t.Fatalf("Flush = %v, %v; want 99", pos, err)
	}
	wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM orders`), 0, 99)
}

// TestPermanentErrors checks the errors a connector cannot retry away.
func TestPermanentErrors(t *testing.T) {
	tests := []struct {
		name  string
		setup string
		cfg   func(c *sinkConfig)
		want  string
	}{
		{"missing table", ``, func(c *sinkConfig) {}, "table does not exist"},
		{"missing column", `CREATE TABLE orders (id text, seq bigint)`, func(c *sinkConfig) {},
			`column "customer": not in the table; add it (ALTER TABLE "orders" ADD COLUMN IF NOT EXISTS "customer" text;) or set evolve: true`},
		{"missing column, evolve: false", `CREATE TABLE orders (id text, seq bigint)`,
			func(c *sinkConfig) { c.CreateTable, c.Evolve = true, new(false) },
			`column "customer": not in the table; add it (ALTER TABLE "orders" ADD COLUMN IF NOT EXISTS "customer" text;)`},
		{"type mismatch", strings.Replace(appendTable, "seq bigint", "seq boolean", 1), func(c *sinkConfig) {},
			`column "seq": the table has boolean, the mapping says int64 (want one of bigint, numeric); change the mapping's type, or the column's (ALTER TABLE "orders" ALTER COLUMN "seq" TYPE bigint USING "seq"::bigint;)`},
		// Evolution adds columns; it never changes a type.
		{"type mismatch, evolve: true", strings.Replace(appendTable, "seq bigint", "seq boolean", 1),
			func(c *sinkConfig) { c.Evolve = new(true) }, `column "seq": the table has boolean`},
		{"upsert without hidden columns", appendTable, func(c *sinkConfig) { c.Mode, c.Key = modeUpsert, []string{"id"} }, "hidden ordering columns"},
		{"upsert key without unique index", strings.TrimSuffix(appendTable, ")") + ", _ehsink_partition text, _ehsink_seq bigint)",
			func(c *sinkConfig) { c.Mode, c.Key = modeUpsert, []string{"id"} }, "unique index"},
		// PostgreSQL 15 grants no CREATE on schema public to PUBLIC.
		{"permission denied", appendTable + `; CREATE ROLE limited LOGIN`,
			func(c *sinkConfig) {
				c.DSN = secret.String(strings.Replace(c.DSN.Reveal(), "postgres@", "limited@", 1))
			}, "permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dsn := newDB(t)
			if tt.setup != "" {
				execSQL(t, dsn, tt.setup)
				if strings.Contains(tt.setup, "ROLE limited") {
					t.Cleanup(func() { execSQL(t, testenv.Postgres(t).DSN(), `DROP ROLE IF EXISTS limited`) })
				}
			}
			cfg := appendConfig(t, dsn)
			tt.cfg(cfg)
			_, err := newPostgresSink(testCtx(t), cfg, testInfo)
			if err == nil {
				t.Fatal("New: no error")
			}
			if sinks.IsTransient(err) {
				t.Errorf("permanent error marked transient: %v", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), `connector "orders"`) {
				t.Fatalf("error %q does not say %q and name the connector", err, tt.want)
			}
		})
	}
}

// TestCreateTable derives the table from the mapping and then writes to it.
func TestCreateTable(t *testing.T) {
	dsn := newDB(t)
	cfg := appendConfig(t, dsn)
	cfg.Table = "sales.orders"
	cfg.CreateTable = true
	execSQL(t, dsn, `CREATE SCHEMA sales`)
	s := newTestSink(t, cfg)
	cp := &checkpointStore{seq: map[string]int64{}}
	runPartition(t, s, cp, "0", sinktest.Events("0", 0, 9), 10, nil)
	wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM sales.orders`), 0, 9)
	if n := queryInts(t, dsn, `SELECT count(*) FROM sales.ehsink_watermarks`); n[0] != 1 {
		t.Fatalf("watermark rows in the target's schema: %d, want 1", n[0])
	}
}

// TestUpsertRepeatedKeyThenNewKeys: a flush whose batch repeats a key,
// followed by a batch of new keys, keeps every key's newest row. (The
// in-batch collapse once left two buffered rows sharing one value buffer,
// and the next batch overwrote a row before it was copied.)
func TestUpsertRepeatedKeyThenNewKeys(t *testing.T) {
	dsn := newDB(t)
	s := newTestSink(t, upsertConfig(t, dsn))
	ctx := testCtx(t)
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	batches := [][]sinks.Event{
		{sinktest.Event("0", 0), sinktest.Event("0", 7)}, // one key (c-0) twice
		{sinktest.Event("0", 8), sinktest.Event("0", 9)}, // keys c-1, c-2
		{sinktest.Event("0", 14), sinktest.Event("0", 15), sinktest.Event("0", 16)},
	}
	for _, b := range batches {
		if err := w.Write(ctx, b); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := queryInts(t, dsn, `SELECT seq FROM latest ORDER BY seq`)
	keys := map[int64]int64{} // sinktest keys events by seq % 7 -> newest seq sent
	for _, b := range batches {
		for _, ev := range b {
			keys[ev.SequenceNumber%7] = ev.SequenceNumber
		}
	}
	var wantSeqs []int64
	for _, seq := range keys {
		wantSeqs = append(wantSeqs, seq)
	}
	slices.Sort(wantSeqs)
	if !slices.Equal(got, wantSeqs) {
		t.Fatalf("rows hold seqs %v, want the newest per key %v", got, wantSeqs)
	}
}

// TestTableLimitsArePerEvent: a value too long for a varchar(n) column is
// an error of its event (dead-lettered by the runner), not a COPY failure
// that would stop the partition on every replay; a numeric(p,s) column
// mapped without its precision is refused at start, with the fix.
func TestTableLimitsArePerEvent(t *testing.T) {
	t.Run("varchar", func(t *testing.T) {
		dsn := newDB(t)
		execSQL(t, dsn, strings.Replace(appendTable, "customer text", "customer varchar(3)", 1))
		s := newTestSink(t, appendConfig(t, dsn))
		ctx := testCtx(t)
		w, _, err := s.Open(ctx, "0")
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close(ctx)
		evs := sinktest.Events("0", 0, 4)
		evs[2].Body = []byte(strings.Replace(string(evs[2].Body), `"customer":"c-2"`, `"customer":"c-2-too-long"`, 1))
		evs[3].Body = []byte(strings.Replace(string(evs[3].Body), `"customer":"c-3"`, `"customer":"c-3      "`, 1)) // trailing spaces fit
		err = w.Write(ctx, evs)
		var be *sinks.BatchError
		if !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 2 ||
			!strings.Contains(be.Failed[0].Err.Error(), `column "customer"`) || !strings.Contains(be.Failed[0].Err.Error(), "limit of 3") {
			t.Fatalf("Write = %v, want event 2 rejected naming the column and its limit", err)
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatalf("Flush after the rejection: %v", err)
		}
		if got := queryInts(t, dsn, `SELECT seq FROM orders ORDER BY seq`); !slices.Equal(got, []int64{0, 1, 3, 4}) {
			t.Fatalf("rows %v, want [0 1 3 4]", got)
		}
	})
	// char(n) columns: format_type names them bpchar without their
	// length, "character(n)" with it; the upsert's arrays are bpchar[].
	t.Run("char", func(t *testing.T) {
		for _, mode := range []string{modeAppend, modeUpsert} {
			t.Run(mode, func(t *testing.T) {
				dsn := newDB(t)
				cfg := appendConfig(t, dsn)
				if mode == modeUpsert {
					cfg = upsertConfig(t, dsn)
					cfg.CreateTable = false
					cfg.Table = "orders"
					execSQL(t, dsn, `CREATE TABLE orders (id text NOT NULL, seq bigint, customer char(3) PRIMARY KEY,
						amount numeric(12,2), ts timestamptz, part text NOT NULL, enqueued timestamptz NOT NULL,
						_ehsink_partition text, _ehsink_seq bigint)`)
				} else {
					execSQL(t, dsn, strings.Replace(appendTable, "customer text", "customer char(3)", 1))
				}
				s := newTestSink(t, cfg)
				ctx := testCtx(t)
				w, _, err := s.Open(ctx, "0")
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close(ctx)
				if err := w.Write(ctx, sinktest.Events("0", 0, 2)); err != nil {
					t.Fatal(err)
				}
				if _, err := w.Flush(ctx); err != nil {
					t.Fatalf("Flush into a char(3) column: %v", err)
				}
				if got := queryInts(t, dsn, `SELECT seq FROM orders ORDER BY seq`); !slices.Equal(got, []int64{0, 1, 2}) {
					t.Fatalf("rows %v, want [0 1 2]", got)
				}
			})
		}
	})
	t.Run("numeric without its precision", func(t *testing.T) {
		dsn := newDB(t)
		execSQL(t, dsn, appendTable) // amount numeric(12,2)
		cfg := appendConfig(t, dsn)
		for i := range cfg.Columns {
			if cfg.Columns[i].Name == "amount" {
				cfg.Columns[i].Type = mapping.Type{Kind: mapping.KindDecimal}
			}
		}
		_, err := newPostgresSink(testCtx(t), cfg, testInfo)
		if err == nil || !strings.Contains(err.Error(), `column "amount"`) || !strings.Contains(err.Error(), "numeric(12,2)") {
			t.Fatalf("New = %v, want the amount column refused with numeric(12,2) named", err)
		}
	})
}
