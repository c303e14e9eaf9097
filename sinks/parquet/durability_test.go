package parquet

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestCrashForgetsUnsyncedWrites runs four commits on a file system whose
// crash forgets every write not fsynced and every folder entry whose
// folder was not fsynced (crashFS), and crashes it before each step of the
// commits in turn (every write, fsync, claim, link, unlink, folder fsync,
// removal). A new writer then opens on what survived and replays from the
// last checkpoint: what a Flush reported committed is still there (the
// watermark is not behind the checkpoint), and every event is visible once.
// The steps are the store's trace; the test checks what they did, not
// their names: a step that is traced and not done fails it.
func TestCrashForgetsUnsyncedWrites(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*sinkConfig)
		want func(t *testing.T, d destination)
	}{
		{"rows", withSnappy(nil), func(t *testing.T, d destination) { wantExactlyOnce(t, d, "0", 0, 39) }},
		{"routed", withSnappy(routed(t)), func(t *testing.T, d destination) { wantRouted(t, d, "0", 0, 39) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := sinktest.Events("0", 0, 39)
			for k := 1; ; k++ {
				if k > 2000 {
					t.Fatal("the writer never finished")
				}
				d := localDestination(t)
				cp, finished := crashAtStep(t, d, tc.edit, events, k)
				t.Run(fmt.Sprintf("step%03d", k), func(t *testing.T) {
					s := newSink(t, d, tc.edit)
					s.setFS(newCrashFS()) // no crash: it still refuses to replace a file
					w, wm := open(t, s, "0")
					defer w.Close(ctxT(t))
					if cp != nil && (wm == nil || wm.SequenceNumber < cp.SequenceNumber) {
						t.Fatalf("after the crash the watermark is %v, behind the checkpoint %d: a commit Flush reported was lost", wm, cp.SequenceNumber)
					}
					replay(t, w, cp, wm, events)
					tc.want(t, d)
					if left := d.temps(t); len(left) != 0 {
						t.Fatalf("temporary files left: %v", left)
					}
				})
				if finished {
					if k < 20 {
						t.Fatalf("only %d steps", k-1)
					}
					t.Logf("crashed at each of %d steps", k-1)
					return
				}
			}
		})
	}
}

// crashAtStep writes events through a new writer on d, a commit per 10,
// on a crashFS that crashes before the store's k-th step; the writer's
// goroutine then ends, as the process would. It returns the last
// checkpoint (the position of the last Flush that returned) and whether
// the writer finished without a crash.
func crashAtStep(t *testing.T, d destination, edit func(*sinkConfig), events []sinks.Event, k int) (cp *sinks.Position, finished bool) {
	t.Helper()
	s := newSink(t, d, edit)
	cfs := newCrashFS()
	s.setFS(cfs)
	var crashErr error
	n := 0
	s.traceSteps(func(string, string) {
		if n++; n == k {
			crashErr = cfs.Crash()
			runtime.Goexit()
		}
	})
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		ctx := t.Context()
		var w sinks.Writer
		if w, _, err = s.Open(ctx, "0"); err != nil {
			return
		}
		for i := 0; i < len(events); i += 10 {
			if err = w.Write(ctx, events[i:i+10]); err != nil {
				return
			}
			var pos *sinks.Position
			if pos, err = w.Flush(ctx); err != nil {
				return
			}
			cp = pos
		}
		finished = true
	}()
	<-done
	if crashErr != nil {
		t.Fatalf("step %d: crash: %v", k, crashErr)
	}
	if err != nil {
		t.Fatalf("step %d: before the crash: %v", k, err)
	}
	return cp, finished
}

// TestReplayAcrossTheWatermark hands the writer batches that start behind
// its watermark and end past it, as the runner does after a restart from
// a checkpoint older than the sink's commit: the writer itself skips what
// its watermark covers (the events, and dead letters of them), so its
// commits do not overlap the published files and the fence has nothing
// to drop. Both a writer that made the commit and one a new Open made are
// tried.
func TestReplayAcrossTheWatermark(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, nil)
		events := sinktest.Events("0", 0, 59)
		w, _ := open(t, s, "0")
		writeAll(t, w, events[:20])
		if pos := flush(t, w); pos.SequenceNumber != 19 {
			t.Fatalf("watermark %d, want 19", pos.SequenceNumber)
		}
		// The same writer gets 10..29 again (a checkpoint at 9).
		writeAll(t, w, events[10:30])
		if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: events[15], Reason: "replayed"}}); err != nil {
			t.Fatal(err)
		}
		pos, err := w.Flush(ctxT(t))
		if err != nil {
			t.Fatalf("Flush of a replay across the watermark: %v (the writer wrote what its watermark covers)", err)
		}
		if pos.SequenceNumber != 29 {
			t.Fatalf("watermark %d, want 29", pos.SequenceNumber)
		}
		w.Close(ctxT(t))
		// A new writer, resuming from its watermark, gets 20..59 (a
		// checkpoint at 19 read before the commit of 20..29).
		w, wm := open(t, s, "0")
		defer w.Close(ctxT(t))
		if wm == nil || wm.SequenceNumber != 29 {
			t.Fatalf("Open watermark %v, want 29", wm)
		}
		writeAll(t, w, events[20:40])
		writeAll(t, w, events[40:])
		if pos, err := w.Flush(ctxT(t)); err != nil || pos.SequenceNumber != 59 {
			t.Fatalf("Flush = %v, %v; want watermark 59 (the writer wrote what its watermark covers)", pos, err)
		}
		wantExactlyOnce(t, d, "0", 0, 59)
		if got := deadLetterSeqs(t, d); len(got) != 0 {
			t.Fatalf("dead letters %v, want none (seq 15 was committed before)", got)
		}
	})
}
