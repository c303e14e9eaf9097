package connector

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// KillAfterGrowthEnv names the test hook that lands a kill -9 between a
// columns: auto connector's DDL and the first row that uses it (test/e2e
// TestAvroSchemaEvolution). Set to a directory, it makes a process kill
// itself (SIGKILL: no drain, no deferred call) right after it built a
// connector's sink with a derived column the connector's first sink did
// not have, that is after the sink's evolve added it (ALTER TABLE, the
// Iceberg schema update, the Parquet schema of the files to come) and
// before any event is read with it. The directory is shared by the
// replicas: CONNECTOR.columns keeps the columns of the connector's first
// sink, and CONNECTOR.killed (holding the pid) is created by the one
// process that dies, once per connector; the others, and the replica
// started again, run on.
const KillAfterGrowthEnv = "EHSINK_TEST_KILL_AFTER_GROWTH"

// killAfterGrowth is the hook of KillAfterGrowthEnv, called with the
// columns a connector's sink was just built with.
func killAfterGrowth(connector string, cols []string, log *slog.Logger) {
	dir := os.Getenv(KillAfterGrowthEnv)
	if dir == "" {
		return
	}
	first := filepath.Join(dir, connector+".columns")
	b, err := os.ReadFile(first)
	if errors.Is(err, fs.ErrNotExist) {
		_ = os.WriteFile(first, []byte(strings.Join(cols, "\n")), 0o600)
		return
	}
	known := strings.Split(string(b), "\n")
	if err != nil || !slices.ContainsFunc(cols, func(c string) bool { return !slices.Contains(known, c) }) {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, connector+".killed"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		// Killed once already: run on.
		return
	}
	_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	_ = f.Close()
	log.Warn("test hook: killing the process after its sink's columns grew", "env", KillAfterGrowthEnv)
	if p, err := os.FindProcess(os.Getpid()); err == nil && p.Kill() == nil {
		// The signal lands asynchronously: this connector goes no further.
		select {}
	}
	os.Exit(137)
}
