package testenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// leakHelperEnv makes TestHelperLeavesSharedPostgres start the shared
// server and exit, as a package without a TestMain that stops it does.
const leakHelperEnv = "EHSINK_TESTENV_LEAK_HELPER"

// TestHelperLeavesSharedPostgres is run by TestSharedPostgresStopsWithItsBinary
// in a child test binary; run directly, it does nothing. It starts the
// shared server, prints its directory and port, and ends the process
// without StopSharedPostgres.
func TestHelperLeavesSharedPostgres(t *testing.T) {
	if os.Getenv(leakHelperEnv) != "1" {
		return
	}
	pg := Postgres(t)
	fmt.Printf("leaked %s %d\n", pg.dir, pg.port)
	os.Exit(0)
}

// TestSharedPostgresStopsWithItsBinary: a test binary that starts the
// shared PostgreSQL server and ends without stopping it (no TestMain
// calling Main or StopSharedPostgres, a test timeout's panic) leaves no
// server running and no temporary directory behind: `make test` once left
// one server per such package, running long after it ended.
func TestSharedPostgresStopsWithItsBinary(t *testing.T) {
	if os.Getenv(PostgresDSNEnv) != "" {
		t.Skip("the shared server is " + PostgresDSNEnv + "'s, not started by the tests")
	}
	bin := postgresBinDir(t) // skips, or fails under CI=true, without the binaries
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperLeavesSharedPostgres$", "-test.count=1")
	cmd.Env = append(os.Environ(), leakHelperEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var dir string
	var port int
	for line := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(line, "leaked "); ok {
			d, p, _ := strings.Cut(strings.TrimSpace(rest), " ")
			dir = d
			port, err = strconv.Atoi(p)
			if err != nil {
				t.Fatalf("helper said %q", line)
			}
		}
	}
	if dir == "" {
		t.Fatalf("the helper started no server:\n%s", out)
	}
	// Whatever the outcome, nothing stays behind this test.
	t.Cleanup((&PostgresInstance{binDir: bin, dir: dir, port: port, asUser: asUserOf(dir)}).shutdownAndRemove)

	// The reaper acts once the helper is gone; this waits for the effect
	// (a bound on a hang, not a speed assertion).
	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		_, statErr := os.Stat(dir)
		gone := errors.Is(statErr, fs.ErrNotExist)
		c, dialErr := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if dialErr == nil {
			c.Close()
		}
		if gone && dialErr != nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the helper exited, and its shared server still runs (port %d answers: %v) or its directory %s is still there (%v)",
				port, dialErr == nil, dir, statErr)
		case <-tick.C:
		}
	}
}

// asUserOf returns the OS user that runs a server started in dir: postgres
// when this process is root (startPostgresWith), else none.
func asUserOf(string) string {
	if os.Geteuid() == 0 {
		return "postgres"
	}
	return ""
}
