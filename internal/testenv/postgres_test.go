package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/testenv"
)

// TestPostgresStopStart proves a private server accepts connections, goes
// away on Stop, comes back on Start with its data, and that databases from
// NewDatabase are isolated.
func TestPostgresStopStart(t *testing.T) {
	pg := testenv.NewPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dsnA, dsnB := pg.NewDatabase(t), pg.NewDatabase(t)
	exec := func(dsn, sql string) error {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := exec(dsnA, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	if err := exec(dsnB, "SELECT * FROM kept"); err == nil {
		t.Fatal("database B sees database A's table")
	}
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := exec(dsnA, "SELECT 1"); err == nil {
		t.Fatal("connected to a stopped server")
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsnA)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 1 {
		t.Fatalf("after restart: %d, %v", v, err)
	}
}

// TestCrashablePostgresKeepsCommits proves a commit acknowledged just
// before Crash (pg_ctl stop -m immediate) is there after Start.
func TestCrashablePostgresKeepsCommits(t *testing.T) {
	pg := testenv.NewCrashablePostgres(t)
	ctx := context.Background()
	dsn := pg.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int)"); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := conn.Exec(ctx, "INSERT INTO kept VALUES ($1)", i); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close(ctx)
	if err := pg.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM kept").Scan(&n); err != nil || n != 200 {
		t.Fatalf("after the crash: %d rows, %v; want 200", n, err)
	}
}
