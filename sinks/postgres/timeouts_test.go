package postgres

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestSessionTimeoutsFreeOrphanedLocks: a sink session left in an open
// transaction by a client that went silent (the half-open case) is ended
// by the server after idle_in_transaction_timeout, and the row lock it held
// goes to the next session. Without the session setting, the server keeps
// the transaction until its TCP notices the client, hours later, and the
// second session's lock wait runs into the test's deadline.
func TestSessionTimeoutsFreeOrphanedLocks(t *testing.T) {
	ctx := testCtx(t)
	dsn := newDB(t)
	cfg := appendConfig(t, dsn)
	cfg.CreateTable = true
	cfg.IdleInTransactionTimeout = 300 * time.Millisecond
	cfg.StatementTimeout = 7 * time.Second
	s := newTestSink(t, cfg)
	execSQL(t, dsn, `CREATE TABLE locked (id int PRIMARY KEY, v int); INSERT INTO locked VALUES (1, 0)`)

	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer pooled.Release()
	var stmt, idle string
	if err := pooled.QueryRow(ctx, `SELECT current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')`).Scan(&stmt, &idle); err != nil {
		t.Fatal(err)
	}
	if stmt != "7s" || idle != "300ms" {
		t.Errorf("sink session: statement_timeout %q, idle_in_transaction_session_timeout %q; want 7s, 300ms", stmt, idle)
	}
	tx, err := pooled.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `UPDATE locked SET v = 1 WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	// The client now says nothing more, as one whose path died would.

	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	var v int
	if err := other.QueryRow(wait, `SELECT v FROM locked WHERE id = 1 FOR UPDATE`).Scan(&v); err != nil {
		t.Fatalf("a second session could not take the row lock of the orphaned transaction: %v", err)
	}
	t.Logf("row lock of the orphaned transaction free after %s", time.Since(start).Round(time.Millisecond))
	if v != 0 {
		t.Errorf("v = %d: the orphaned transaction was committed, want it rolled back", v)
	}
}

// TestSessionTimeoutsKeepDSNSettings: a timeout the DSN sets itself is
// the operator's choice and is kept; -1s leaves the server's setting.
func TestSessionTimeoutsKeepDSNSettings(t *testing.T) {
	cc, err := pgx.ParseConfig("postgres://u@h/db?statement_timeout=2500&application_name=billing")
	if err != nil {
		t.Fatal(err)
	}
	sessionTimeouts(cc, sinkConfig{StatementTimeout: time.Second, IdleInTransactionTimeout: -time.Second})
	if got := cc.RuntimeParams["statement_timeout"]; got != "2500" {
		t.Errorf("statement_timeout = %q, want the DSN's 2500", got)
	}
	if got := cc.RuntimeParams["application_name"]; got != "billing" {
		t.Errorf("application_name = %q, want the DSN's billing", got)
	}
	if got, set := cc.RuntimeParams["idle_in_transaction_session_timeout"]; set {
		t.Errorf("idle_in_transaction_session_timeout = %q, want it unset with -1s", got)
	}
	if cc.DialFunc == nil || cc.ConnectTimeout == 0 {
		t.Error("want the netdial dialer and a connect timeout")
	}
}

func TestSessionTimeoutsValidate(t *testing.T) {
	cfg := appendConfig(t, "postgres://u@h/db")
	cfg.StatementTimeout = -2 * time.Second
	cfg.IdleInTransactionTimeout = time.Microsecond
	err := cfg.Validate()
	for _, want := range []string{"statement_timeout", "idle_in_transaction_timeout"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want a problem with %s", err, want)
		}
	}
	cfg.DSN = secret.String("postgres://u@h/db")
	cfg.StatementTimeout, cfg.IdleInTransactionTimeout = -time.Second, 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate() = %v, want -1s and zero accepted", err)
	}
}

// TestOrphanedCopyIsEnded: a sink session cut off in the middle of a COPY
// (its data held by a blackholed proxy: the server waits for the rest,
// holding the watermark row's lock, which neither session timeout
// interrupts) is ended by the partition's next owner, whose commit waits
// on that lock: the next owner commits without waiting for the server's
// TCP to notice the dead client. Without it, the next owner's fence runs
// into its statement_timeout for as long as the path stays cut.
func TestOrphanedCopyIsEnded(t *testing.T) {
	ctx := testCtx(t)
	dsn := newDB(t)
	proxied, proxy := testenv.ProxyDSN(t, dsn)
	const stmtTimeout = 4 * time.Second
	config := func(dsn string) *sinkConfig {
		cfg := appendConfig(t, dsn)
		cfg.CreateTable = true
		cfg.StatementTimeout = stmtTimeout
		return cfg
	}

	// The old owner: from event 1000 on, every row carries a marker; the
	// proxy holds the first chunk of COPY data that has one, and everything
	// after it, once the server is in the COPY.
	events := sinktest.Events("7", 0, 1999)
	for i := 1000; i < len(events); i++ {
		events[i].Body = bytes.Replace(events[i].Body, []byte(`"customer":"c-`), []byte(`"customer":"orphan-marker-c-`), 1)
	}
	old := newTestSink(t, config(proxied))
	w1, _, err := old.Open(ctx, "7")
	if err != nil {
		t.Fatal(err)
	}
	if err := w1.Write(ctx, events); err != nil {
		t.Fatal(err)
	}
	proxy.Set(faultproxy.Fault{BlackholeOn: []byte("orphan-marker")})
	fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	if _, err := w1.Flush(fctx); err == nil {
		t.Fatal("the old owner's flush through the blackhole succeeded")
	}
	cancel()

	// The server holds a session in the COPY, waiting for its client.
	probe, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close(context.WithoutCancel(ctx))
	const stuckSQL = `SELECT count(*) FROM pg_stat_activity WHERE application_name = 'ehsink' AND state = 'active'
		AND wait_event = 'ClientRead' AND query LIKE 'COPY%' AND query_start < now() - $1::interval`
	deadline := time.Now().Add(30 * time.Second)
	for {
		var n int
		// older than the orphan rule's statement_timeout + 1 s
		if err := probe.QueryRow(ctx, stuckSQL, (stmtTimeout + 1500*time.Millisecond).String()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup: %d sessions stuck in a COPY for their client, want 1", n)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The next owner, on a path that works.
	var logs testenv.LogBuffer
	info := testInfo
	info.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	next, err := newPostgresSink(ctx, config(dsn), info)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close(context.Background())
	w2, _, err := next.Open(ctx, "7")
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Write(ctx, events[:100]); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w2.Flush(ctx); err != nil {
		t.Fatalf("the next owner's flush behind the orphaned COPY: %v (after %s); its log:\n%s", err, time.Since(start).Round(time.Millisecond), logs.String())
	}
	t.Logf("the next owner committed %s after its flush began", time.Since(start).Round(time.Millisecond))
	// The check logs once its query's answer is read, which may be after
	// the commit it unblocked.
	for logged := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), "ended a sink session whose client is gone"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(logged) {
			t.Errorf("the ended session is not logged; the log:\n%s", logs.String())
			break
		}
	}
	wantExactlyOnce(t, queryInts(t, dsn, `SELECT seq FROM orders WHERE part = '7' ORDER BY seq`), 0, 99)
}

// TestBlackholedFlushReportsNoAnswer: a flush into a half-open path (the
// proxy accepts connections and forwards nothing) waits on its fence, so
// the orphan check runs every second, on a connection of its own through
// the same path. Nothing answers, so nothing may be reported as progress
// once the flush has sent its first statements: the runner must see the
// sink silent and cut the call at errors.sink_timeout. Counted as
// progress, the check's own writes (its startup message, which the
// path takes) kept the call "answering" until its bound, four times the
// sink timeout in the chaos matrix.
func TestBlackholedFlushReportsNoAnswer(t *testing.T) {
	t.Parallel() // it waits on timers, not on CPU
	ctx := testCtx(t)
	proxied, proxy := testenv.ProxyDSN(t, newDB(t))
	cfg := appendConfig(t, proxied)
	cfg.CreateTable = true
	s := newTestSink(t, cfg)
	w, _, err := s.Open(ctx, "7")
	if err != nil {
		t.Fatal(err)
	}
	// A first flush leaves a session in the pool, which the next flush
	// takes at once (one idle for less than a second is not pinged).
	if err := w.Write(ctx, sinktest.Events("7", 0, 9)); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, sinktest.Events("7", 10, 19)); err != nil {
		t.Fatal(err)
	}
	proxy.Set(faultproxy.Fault{Blackhole: true})

	var mu sync.Mutex
	var reports []time.Duration // since the flush began
	start := time.Now()
	fctx, cancel := context.WithTimeout(sinks.WithProgress(ctx, func() {
		mu.Lock()
		reports = append(reports, time.Since(start))
		mu.Unlock()
	}), 5*fenceCheckAfter)
	defer cancel()
	if _, err := w.Flush(fctx); err == nil {
		t.Fatal("a flush through the blackhole succeeded")
	}
	proxy.Heal() // so that the sink closes at once
	mu.Lock()
	defer mu.Unlock()
	// The flush's own statements go out at once; the first check starts
	// fenceCheckAfter later, and another follows before the end.
	for _, at := range reports {
		if at >= fenceCheckAfter {
			t.Fatalf("progress reported %s after the flush began, with nothing answering (all reports: %v)", at.Round(time.Millisecond), reports)
		}
	}
	t.Logf("progress reported %d times, all within %s of the flush's start", len(reports), fenceCheckAfter)
}
