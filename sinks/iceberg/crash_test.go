package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// The child process of TestKillAtEveryStep: it writes seq 10..19 to the
// lake in crashChildDir and kills itself with SIGKILL at step crashChildStep
// of the commit.
const (
	crashChildDir  = "EHSINK_ICEBERG_CRASH_DIR"
	crashChildStep = "EHSINK_ICEBERG_CRASH_STEP"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildDir); dir != "" {
		os.Exit(crashChild(dir, os.Getenv(crashChildStep)))
	}
	testenv.Main(m)
}

func crashChild(dir, step string) int {
	ctx := context.Background()
	l := &lake{dir: dir}
	s, err := newIcebergSink(ctx, l.config(&testing.T{}), testInfo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: new:", err)
		return 2
	}
	w, wm, err := s.Open(ctx, "0")
	if err != nil || wm == nil || wm.SequenceNumber != 9 {
		fmt.Fprintln(os.Stderr, "child: open:", wm, err)
		return 2
	}
	s.setHook(func(at string) error {
		if at == step {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
		return nil
	})
	if err := w.Write(ctx, sinktest.Events("0", 10, 19)); err != nil {
		fmt.Fprintln(os.Stderr, "child: write:", err)
		return 2
	}
	_, err = w.Flush(ctx)
	fmt.Fprintln(os.Stderr, "child: flush returned without reaching step", step, err)
	return 3
}

// TestKillAtEveryStep kills a process with SIGKILL at each step of a
// commit (data files written, manifest written, before and after the
// catalog swap), then starts again from the checkpoint it had (seq 9): the
// next Open reports what the table holds, removes the dead process's
// uncommitted data files, and the replay leaves each event once.
func TestKillAtEveryStep(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		step   string
		wantWM int64 // the watermark the next Open finds
	}{
		{stepDataWritten, 9},
		{stepManifestWritten, 9},
		{stepBeforeSwap, 9},
		{stepAfterSwap, 19},
	} {
		t.Run(strings.ReplaceAll(tc.step, " ", "_"), func(t *testing.T) {
			ctx := context.Background()
			l := newLake(t)
			s := l.newSink(t, nil)
			w := writeTen(t, s)
			if _, err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			w.Close(ctx)
			s.Close(ctx)

			cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(cctx, exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), crashChildDir+"="+l.dir, crashChildStep+"="+tc.step)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child: %v, want killed by SIGKILL\n%s", err, out)
			}
			if tc.step != stepAfterSwap && countParquet(t, l.warehousePath()) <= 1 {
				t.Fatalf("the child left no data file of its commit: the crash test tests nothing")
			}

			s = l.newSink(t, func(c *sinkConfig) { c.Maintenance.OrphanAge = time.Nanosecond })
			w, wm, err := s.Open(ctx, "0")
			if err != nil {
				t.Fatal(err)
			}
			if wm == nil || wm.SequenceNumber != tc.wantWM {
				t.Fatalf("watermark after the kill %v, want seq %d", wm, tc.wantWM)
			}
			if err := w.Write(ctx, dedupe.After(sinktest.Events("0", 10, 29), wm)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			w.Close(ctx)
			got := l.scanSeqs(t)["0"]
			if len(got) != 30 {
				t.Fatalf("partition 0 holds %d rows, want 30: %v", len(got), got)
			}
			for i, seq := range got {
				if seq != int64(i) {
					t.Fatalf("partition 0 holds %v, want 0..29 once each", got)
				}
			}
			// What the dead process wrote and never committed is gone: every
			// data file left is one the table references.
			tasks, err := l.loadTable(t).Scan().PlanFiles(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n := countParquet(t, l.warehousePath()); n != len(tasks) {
				t.Fatalf("%d data files in the warehouse, the table references %d", n, len(tasks))
			}
		})
	}
}

func countParquet(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && strings.Contains(p, "/data/") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
