package delta

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// The child process of TestKilledAtEachStep: it commits seq 0..9, then
// dies (exit status 7, no deferred call, no Close) at the step named by
// $EHSINK_DELTA_KILL_STEP of the commit of seq 10..19.
func TestKilledChild(t *testing.T) {
	dir, step := os.Getenv("EHSINK_DELTA_KILL_DIR"), os.Getenv("EHSINK_DELTA_KILL_STEP")
	if dir == "" {
		t.Skip("the child of TestKilledAtEachStep; runs only under it")
	}
	s := newTestSink(t, dir, func(c *sinkConfig) { c.CheckpointInterval = 2 })
	w, _, err := s.Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	writeFlush(t, w, sinktest.Events("0", 0, 9))
	s.setHook(func(st string) error {
		if st == step {
			os.Exit(7)
		}
		return nil
	})
	writeFlush(t, w, sinktest.Events("0", 10, 19))
	t.Fatal("the flush passed its kill step " + step)
}

// TestKilledAtEachStep kills a process at each step of a commit (data
// files stored; commit file created; checkpoint written, _last_checkpoint
// not yet) and starts the sink again on the table: it resumes from the
// table's txn, and the replay leaves every event in the table once.
func TestKilledAtEachStep(t *testing.T) {
	if os.Getenv("EHSINK_DELTA_KILL_DIR") != "" {
		t.Skip("in the child")
	}
	for _, tc := range []struct {
		step string
		wm   int64 // the watermark the table holds after the kill
	}{{stepDataWritten, 9}, {stepCommitted, 19}, {stepCheckpointed, 19}} {
		t.Run(tc.step, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), "EHSINK_DELTA_KILL_DIR="+dir, "EHSINK_DELTA_KILL_STEP="+tc.step)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 7 {
				t.Fatalf("child: %v, want exit status 7 at %s\n%s", err, tc.step, out)
			}
			w, wm, err := newTestSink(t, dir, nil).Open(testCtx(t), "0")
			if err != nil {
				t.Fatal(err)
			}
			if wm == nil || wm.SequenceNumber != tc.wm {
				t.Fatalf("watermark after a kill at %s: %v, want seq %d", tc.step, wm, tc.wm)
			}
			if batch := dedupe.After(sinktest.Events("0", 10, 29), wm); len(batch) > 0 {
				writeFlush(t, w, batch)
			}
			wantOnce(t, dir, "0", 0, 29)
		})
	}
}
