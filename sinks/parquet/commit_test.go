package parquet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// stepLabel names a traced path by its role in a commit.
func stepLabel(root, p string) string {
	rel, _ := filepath.Rel(root, p)
	rel = filepath.ToSlash(rel)
	base := filepath.Base(p)
	switch {
	case strings.HasPrefix(base, tempPrefix) && strings.HasPrefix(rel, claimsRoot+"/"):
		return "claim-temp"
	case strings.HasPrefix(base, tempPrefix) && strings.Contains(rel, "/"+deadLetterDir+"/"):
		return "dl-temp"
	case strings.HasPrefix(base, tempPrefix):
		return "data-temp"
	case strings.HasPrefix(rel, claimsRoot+"/") && strings.HasSuffix(rel, ".json"):
		return "claim"
	case strings.HasPrefix(rel, claimsRoot+"/"):
		return "claims-dir"
	case strings.Contains(rel, "/"+deadLetterDir+"/"):
		return "dl"
	case strings.HasSuffix(rel, ".parquet"):
		return "data"
	case strings.HasSuffix(rel, deadLetterDir):
		return "dl-dir"
	}
	return "data-dir"
}

// TestCommitStepOrder records the steps of a local commit with dead
// letters and checks their order: every write of a file before its fsync;
// both files fsynced before the claim (whose own bytes are fsynced before
// its name appears); the dead letters published (link, temporary name
// removed, folder fsynced) before the data file, which is published last;
// then the previous commit's claim is removed.
func TestCommitStepOrder(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, nil)
	root := s.store.(*localStore).root
	var steps []string
	s.traceSteps(func(step, p string) { steps = append(steps, step+" "+stepLabel(root, p)) })
	events := sinktest.Events("0", 0, 39)
	events[3] = badEvent(events[3])
	events[23] = badEvent(events[23])
	w, _ := open(t, s, "0")
	defer w.Close(ctxT(t))
	var be *sinks.BatchError
	if err := w.Write(ctxT(t), events[:20]); !errors.As(err, &be) || len(be.Failed) != 1 {
		t.Fatalf("Write: %v, want one failed event", err)
	}
	if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: events[3], Reason: "bad amount"}}); err != nil {
		t.Fatal(err)
	}
	flush(t, w) // the first commit creates the folders (and fsyncs their parents)
	steps = steps[:0]
	err := w.Write(ctxT(t), events[20:])
	if !errors.As(err, &be) || len(be.Failed) != 1 {
		t.Fatalf("Write: %v, want one failed event", err)
	}
	if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: events[23], Reason: "bad amount"}}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)

	var order []string
	fsynced := map[string]bool{}
	for _, st := range steps {
		step, label, _ := strings.Cut(st, " ")
		if step == "write" {
			if fsynced[label] {
				t.Fatalf("a write to %s after its fsync: %v", label, steps)
			}
			continue
		}
		if step == "fsync" {
			fsynced[label] = true
		}
		order = append(order, st)
	}
	want := []string{
		"fsync dl-temp", "fsync data-temp",
		"fsync claim-temp", "claim claim", "fsync-dir claims-dir",
		"link dl", "unlink dl-temp", "fsync-dir dl-dir",
		"link data", "unlink data-temp", "fsync-dir data-dir",
		"remove claim", // the first commit's: this one is published
	}
	if !slices.Equal(order, want) {
		t.Fatalf("commit steps\n%v\nwant\n%v", order, want)
	}
	wantExactlyOnce(t, d, "0", 0, 39, 3, 23)
}

// listHookStore runs a function right after the next list returns, which
// stands for another writer acting between a fence's look and the commit.
type listHookStore struct {
	store
	after func()
}

func (l *listHookStore) list(ctx context.Context, prefix string) ([]object, error) {
	objs, err := l.store.list(ctx, prefix)
	if f := l.after; f != nil {
		l.after = nil
		f()
	}
	return objs, err
}

// TestClaimClosesFenceRace: writer A's fence looks at the committed files
// and finds nothing; then writer B, which read the same watermark, commits
// seq 0..9; then A tries to commit 0..19. A's claim on that watermark
// fails, A discards its file with sinks.ErrFenced, and after A reopens and
// replays, each event is visible once.
func TestClaimClosesFenceRace(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		a, b := newSink(t, d, nil), newSink(t, d, nil)
		events := sinktest.Events("5", 0, 19)
		wa, _ := open(t, a, "5")
		wb, _ := open(t, b, "5")
		writeAll(t, wa, events)
		writeAll(t, wb, events[:10])
		a.wrapStore(func(st store) store {
			return &listHookStore{store: st, after: func() { flush(t, wb) }}
		})
		if _, err := wa.Flush(ctxT(t)); !errors.Is(err, sinks.ErrFenced) {
			t.Fatalf("A's Flush = %v, want sinks.ErrFenced", err)
		}
		wantExactlyOnce(t, d, "5", 0, 9)
		wa.Close(ctxT(t))

		wa, wm := open(t, a, "5")
		defer wa.Close(ctxT(t))
		if wm == nil || wm.SequenceNumber != 9 {
			t.Fatalf("watermark after B's commit = %v, want 9", wm)
		}
		replay(t, wa, nil, wm, events)
		wantExactlyOnce(t, d, "5", 0, 19)
		if left := d.temps(t); len(left) != 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	})
}

// The kill -9 test: the test binary runs itself as a child that writes
// through the sink and kills itself (SIGKILL) just before step k of its
// commits; the parent then restarts the partition from the child's last
// checkpoint, as a new process would, and checks the output.
const (
	crashDirEnv     = "EHSINK_PARQUET_CRASH_DIR"
	crashStepEnv    = "EHSINK_PARQUET_CRASH_STEP"
	crashExplodeEnv = "EHSINK_PARQUET_CRASH_EXPLODE"
	crashRoutedEnv  = "EHSINK_PARQUET_CRASH_ROUTED" // set: the child's sink has routes
	crashBad        = 25
)

func crashEvents(explode bool) []sinks.Event {
	if explode {
		return explodeEvents()
	}
	events := sinktest.Events("0", 0, 39)
	events[crashBad] = badEvent(events[crashBad])
	return events
}

// TestKilledChild is the child's body; it does nothing unless run as one.
func TestKilledChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		return
	}
	at, _ := strconv.Atoi(os.Getenv(crashStepEnv))
	explode := os.Getenv(crashExplodeEnv) != ""
	c := newConfig()
	c.Dir = filepath.Join(dir, "data")
	c.Columns = kitColumns(t)
	withSnappy(nil)(c)
	if explode {
		explodeConfig(t, c)
	}
	if os.Getenv(crashRoutedEnv) != "" {
		routed(t)(c)
	}
	s, err := newParquetSink(context.Background(), c, sinks.Info{Connector: "orders-pq", EventHub: "orders", ConsumerGroup: "$Default"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	s.traceSteps(func(string, string) {
		if n++; n == at {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	})
	w, _ := open(t, s, "0")
	events := crashEvents(explode)
	for i := 0; i < len(events); i += 10 {
		err := w.Write(ctxT(t), events[i:i+10])
		var be *sinks.BatchError
		if errors.As(err, &be) {
			var letters []sinks.DeadLetter
			for _, f := range be.Failed {
				letters = append(letters, sinks.DeadLetter{Event: events[i+f.Index], Reason: f.Err.Error()})
			}
			if err := w.DeadLetter(ctxT(t), letters); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if (i/10)%2 == 1 { // a file per 20 events
			pos := flush(t, w)
			// the checkpoint, written atomically
			tmp := filepath.Join(dir, "checkpoint.tmp")
			if err := os.WriteFile(tmp, []byte(strconv.FormatInt(pos.SequenceNumber, 10)), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, "checkpoint")); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestKillAtEachCommitStep kills the child at every step of its commits in
// turn (writes, fsyncs, the claim, links, unlinks, folder fsyncs), then
// restarts: each event is in a visible file exactly once (read back with
// arrow-go), the dead letter once, no temporary file is left or visible as
// a final file. With explode, each element (sequence number, index) is
// there exactly once, and the rows a clean run makes are all there. With
// routes, the commits have a file per route and customer (up to five)
// besides the dead letters, and each route's files must hold its events
// exactly once.
func TestKillAtEachCommitStep(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		return
	}
	t.Run("rows", func(t *testing.T) { killAtEachCommitStep(t, false, false) })
	t.Run("explode", func(t *testing.T) { killAtEachCommitStep(t, true, false) })
	t.Run("routed", func(t *testing.T) { killAtEachCommitStep(t, false, true) })
}

func killAtEachCommitStep(t *testing.T, explode, withRoutes bool) {
	events := crashEvents(explode)
	for k := 1; ; k++ {
		if k > 1000 {
			t.Fatal("the child never finished")
		}
		dir := t.TempDir()
		cmd := exec.CommandContext(ctxT(t), os.Args[0], "-test.run=^TestKilledChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashStepEnv+"="+strconv.Itoa(k))
		if explode {
			cmd.Env = append(cmd.Env, crashExplodeEnv+"=1")
		}
		if withRoutes {
			cmd.Env = append(cmd.Env, crashRoutedEnv+"=1")
		}
		out, err := cmd.CombinedOutput()
		finished := err == nil
		if !finished {
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != -1 || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("step %d: child failed: %v\n%s", k, err, out)
			}
		}
		t.Run(fmt.Sprintf("step%03d", k), func(t *testing.T) {
			d := localDestinationAt(filepath.Join(dir, "data"))
			var cp *sinks.Position
			if b, err := os.ReadFile(filepath.Join(dir, "checkpoint")); err == nil {
				seq, _ := strconv.ParseInt(string(b), 10, 64)
				cp = &sinks.Position{SequenceNumber: seq}
			}
			var edit func(*sinkConfig)
			switch {
			case explode:
				edit = func(c *sinkConfig) { explodeConfig(t, c) }
			case withRoutes:
				edit = routed(t)
			}
			s := newSink(t, d, withSnappy(edit))
			w, wm := open(t, s, "0")
			defer w.Close(ctxT(t))
			if left := d.temps(t); len(left) != 0 {
				t.Fatalf("temporary files left after Open: %v", left)
			}
			if cp != nil && (wm == nil || wm.SequenceNumber < cp.SequenceNumber) {
				t.Fatalf("watermark %v behind the checkpoint %d", wm, cp.SequenceNumber)
			}
			for name := range d.files(t) {
				if !strings.HasSuffix(name, ".parquet") && !strings.HasSuffix(name, ".jsonl") {
					t.Fatalf("visible file %q is not a data or dead-letter file", name)
				}
			}
			replayWithDeadLetters(t, w, cp, wm, events)
			if explode {
				wantExplodedOnce(t, d)
				return
			}
			if withRoutes {
				wantRouted(t, d, "0", 0, 39, crashBad)
			} else {
				wantExactlyOnce(t, d, "0", 0, 39, crashBad)
			}
			if got := deadLetterSeqs(t, d); !slices.Equal(got, []int64{crashBad}) {
				t.Fatalf("dead letters %v, want [%d] once", got, crashBad)
			}
		})
		if finished {
			t.Logf("killed the child at each of %d steps", k-1)
			return
		}
	}
}

// TestCommitWhoseTempIsGoneIsFenced: another owner's Open removed this
// writer's prepared file between its claim and its publish (it cleans up
// temporary files it takes for abandoned). The writer has lost the
// partition: Flush reports sinks.ErrFenced, not a failure of the connector,
// and a replay from a new Open writes every event once.
func TestCommitWhoseTempIsGoneIsFenced(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, nil)
	events := sinktest.Events("5", 0, 9)
	w, _ := open(t, s, "5")
	writeAll(t, w, events)
	s.traceSteps(func(step, path string) {
		if step != "link" || !strings.HasSuffix(path, ".parquet") {
			return
		}
		for _, tmp := range d.temps(t) {
			if err := os.Remove(tmp); err != nil {
				t.Error(err)
			}
		}
	})
	if _, err := w.Flush(ctxT(t)); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("Flush = %v, want sinks.ErrFenced", err)
	}
	w.Close(ctxT(t))
	s.traceSteps(nil)

	w, wm := open(t, s, "5")
	defer w.Close(ctxT(t))
	replay(t, w, nil, wm, events)
	wantExactlyOnce(t, d, "5", 0, 9)
}
