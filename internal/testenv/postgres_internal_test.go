package testenv

import (
	"errors"
	"testing"
)

// TestExternalPostgresIsNotStopped: a server named by
// EHSINK_TEST_POSTGRES_DSN is not the tests' to stop or start. (Built by
// hand so as not to touch the binary's shared instance.)
func TestExternalPostgresIsNotStopped(t *testing.T) {
	pg := &PostgresInstance{dsn: "postgres://nobody@127.0.0.1:1/x", external: true}
	if err := pg.Stop(); !errors.Is(err, ErrExternalPostgres) {
		t.Fatalf("Stop of an external server = %v, want ErrExternalPostgres", err)
	}
	if err := pg.Start(); !errors.Is(err, ErrExternalPostgres) {
		t.Fatalf("Start of an external server = %v, want ErrExternalPostgres", err)
	}
}

func TestWithDatabase(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p@h:5/postgres?sslmode=disable": "postgres://u:p@h:5/t1?sslmode=disable",
		"host=h port=5 user=u":                        "host=h port=5 user=u dbname=t1",
	} {
		if got := withDatabase(dsn, "t1"); got != want {
			t.Errorf("withDatabase(%q) = %q, want %q", dsn, got, want)
		}
	}
}
