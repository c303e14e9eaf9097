package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/secret"
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
	cc, err := pgx.ParseConfig("postgres://u@h/db?statement_timeout=2500")
	if err != nil {
		t.Fatal(err)
	}
	sessionTimeouts(cc, sinkConfig{StatementTimeout: time.Second, IdleInTransactionTimeout: -time.Second})
	if got := cc.RuntimeParams["statement_timeout"]; got != "2500" {
		t.Errorf("statement_timeout = %q, want the DSN's 2500", got)
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
