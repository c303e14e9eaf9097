package iceberg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// routed makes c send the kit's events of customers c-0, c-1 and c-2 to
// table big and the others to table rest.
func routed(c *sinkConfig) {
	c.Routes = []routeConfig{
		{Name: "big", When: "$.customer in ['c-0', 'c-1', 'c-2']", Table: "big", Columns: c.Columns},
		{Table: "rest", Columns: c.Columns},
	}
	c.Table, c.Columns = "", nil
}

// toBig reports whether the kit's event seq takes the big route.
func toBig(seq int64) bool { return seq%7 <= 2 }

// split returns the sequence numbers from..to of each route, big and rest.
func split(from, to int64) (big, rest []int64) {
	for seq := from; seq <= to; seq++ {
		if toBig(seq) {
			big = append(big, seq)
		} else {
			rest = append(rest, seq)
		}
	}
	return big, rest
}

// TestRoutedFailAtEveryStep fails the Flush of a routed writer at every
// step of each of its two tables' commits, then resumes the partition as
// the runner does: from its checkpoint (the position of the last Flush
// that returned), with the writer of a new sink. Each table must hold each
// of its events once: a table that committed before the failure skips the
// events it holds (counted by Trimmed), the other writes them.
func TestRoutedFailAtEveryStep(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	steps := []string{stepDataWritten, stepManifestWritten, stepBeforeSwap, stepAfterSwap}
	var ckpt int64 = -1
	for n := 1; n <= 2*len(steps); n++ {
		step := steps[(n-1)%len(steps)]
		t.Run(fmt.Sprintf("%s_of_table_%d", step, (n+len(steps)-1)/len(steps)), func(t *testing.T) {
			from, to := ckpt+1, ckpt+10
			s := l.newSink(t, routed)
			w, wm, err := s.Open(ctx, "0")
			if err != nil {
				t.Fatal(err)
			}
			if wm != nil {
				t.Fatalf("a routed sink's Open reported watermark %v: its tables commit one by one, so none speaks for all", wm)
			}
			seen := 0
			s.setHook(func(name string) error {
				if name == step {
					if seen++; seen == (n+len(steps)-1)/len(steps) {
						return errors.New("injected: the process dies here")
					}
				}
				return nil
			})
			if err := w.Write(ctx, sinktest.Events("0", from, to)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Flush(ctx); err == nil {
				t.Fatalf("Flush passed the failure injected at %s", step)
			}
			// The process dies: no Close, no checkpoint.
			firstDone := n > len(steps) || step == stepAfterSwap

			s = l.newSink(t, func(c *sinkConfig) { routed(c); c.Maintenance.OrphanAge = time.Nanosecond })
			w, _, err = s.Open(ctx, "0")
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close(ctx)
			if err := w.Write(ctx, sinktest.Events("0", from, to)); err != nil {
				t.Fatal(err)
			}
			pos, err := w.Flush(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if pos == nil || pos.SequenceNumber != to {
				t.Fatalf("Flush returned %v, want seq %d", pos, to)
			}
			wantTrim := 0
			for seq := from; seq <= to; seq++ {
				if firstDone && toBig(seq) {
					wantTrim++
				}
			}
			if n > len(steps) && step == stepAfterSwap {
				wantTrim = 10 // both tables committed before the failure
			}
			if got := w.(*writer).Trimmed(); got != wantTrim {
				t.Fatalf("Trimmed() = %d, want %d (the events the tables held before the resumed Flush)", got, wantTrim)
			}
			ckpt = to
		})
	}
	wantBig, wantRest := split(0, ckpt)
	if got := l.scanNamed(t, "big")["0"]; !slices.Equal(got, wantBig) {
		t.Errorf("table big holds %v, want %v", got, wantBig)
	}
	if got := l.scanNamed(t, "rest")["0"]; !slices.Equal(got, wantRest) {
		t.Errorf("table rest holds %v, want %v", got, wantRest)
	}
	if n := countParquet(t, l.warehousePath()); n > int(2*(ckpt+1)) {
		t.Errorf("%d data files in the warehouse: uncommitted ones were left behind", n)
	}
}

// TestRoutedWriterFencedByEitherTable: two owners of a partition at once;
// the one that commits second is fenced by the first table it finds
// advanced, and commits nothing twice.
func TestRoutedWriterFencedByEitherTable(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, routed)
	stale, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close(ctx)
	owner, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close(ctx)
	for _, w := range []sinks.Writer{owner, stale} {
		if err := w.Write(ctx, sinktest.Events("0", 0, 13)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := owner.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.Flush(ctx); !errors.Is(err, sinks.ErrFenced) {
		t.Fatalf("the stale owner's Flush: %v, want ErrFenced", err)
	}
	wantBig, wantRest := split(0, 13)
	if got := l.scanNamed(t, "big")["0"]; !slices.Equal(got, wantBig) {
		t.Errorf("table big holds %v, want %v", got, wantBig)
	}
	if got := l.scanNamed(t, "rest")["0"]; !slices.Equal(got, wantRest) {
		t.Errorf("table rest holds %v, want %v", got, wantRest)
	}
}

// TestRoutedEventNoRouteTakes: without a default route, an event no
// condition takes is the event's error (a dead letter naming why), and the
// Flush still moves past it. Its letters then replay once the default
// route is added (replayIntoNewRoute).
func TestRoutedEventNoRouteTakes(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	s := l.newSink(t, func(c *sinkConfig) { routed(c); c.Routes = c.Routes[:1] })
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	evs := sinktest.Events("0", 0, 6)
	err = w.Write(ctx, evs)
	var be *sinks.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("Write: %v, want a *sinks.BatchError", err)
	}
	var failed []int64
	var letters []sinks.DeadLetter
	for _, f := range be.Failed {
		if !errors.Is(f.Err, routing.ErrNoRoute) {
			t.Errorf("event %d: %v, want ErrNoRoute", f.Index, f.Err)
		}
		failed = append(failed, int64(f.Index))
		letters = append(letters, sinks.DeadLetter{Event: evs[f.Index], Reason: f.Err.Error(), FailedAt: time.Now()})
	}
	if err := w.(sinks.DeadLetterer).DeadLetter(ctx, letters); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 4, 5, 6}; !slices.Equal(failed, want) {
		t.Errorf("failed events %v, want %v", failed, want)
	}
	pos, err := w.Flush(ctx)
	if err != nil || pos == nil || pos.SequenceNumber != 6 {
		t.Fatalf("Flush: %v, %v; want seq 6", pos, err)
	}
	if got := l.scanNamed(t, "big")["0"]; !slices.Equal(got, []int64{0, 1, 2}) {
		t.Errorf("table big holds %v, want [0 1 2]", got)
	}
	replayIntoNewRoute(t, l)
}

// TestRoutedTemplatedTables: a route whose table is a template of event
// values creates each table it names, up to max_tables; a name past the
// bound, or one that is not a table name, makes the event a dead letter.
// A second sink replaying the same events (a resume from the checkpoint)
// finds what each named table holds and writes nothing twice.
func TestRoutedTemplatedTables(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	cols := func() mapping.Columns {
		var cs mapping.Columns
		for _, c := range [][3]string{{"seq", "@sequence_number", "int64"}, {"partition", "@partition", "string"}} {
			col, err := mapping.NewColumn(c[0], c[1], c[2])
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, col)
		}
		return cs
	}
	edit := func(c *sinkConfig) {
		c.Table, c.Columns = "", nil
		c.Routes = []routeConfig{
			{Name: "kinds", When: "exists($.kind)", Table: "k_{$.kind}", Columns: cols(), MaxTables: 2},
			{Name: "rest", Table: "rest", Columns: cols()},
		}
	}
	var events []sinks.Event
	for i, body := range []string{`{"kind":"a"}`, `{"kind":"b"}`, `{"kind":"a"}`, `{"kind":"c"}`, `{"kind":"x-y"}`, `{}`} {
		events = append(events, sinks.Event{Partition: "0", SequenceNumber: int64(i), Offset: strconv.Itoa(i), Body: []byte(body)})
	}
	for run := range 2 {
		s := l.newSink(t, edit)
		w, _, err := s.Open(ctx, "0")
		if err != nil {
			t.Fatal(err)
		}
		err = w.Write(ctx, events)
		var be *sinks.BatchError
		if !errors.As(err, &be) || len(be.Failed) != 2 {
			t.Fatalf("run %d: Write: %v, want events 3 and 4 failed", run, err)
		}
		for k, want := range map[int]string{3: "max_tables", 4: "not a table name"} {
			if f := be.Failed[k-3]; f.Index != k || !strings.Contains(f.Err.Error(), want) {
				t.Errorf("run %d: failed event %d: %v, want event %d: ...%s...", run, k-3, f.Err, k, want)
			}
		}
		if _, err := w.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := w.(*writer).Trimmed(), 4*run; got != want {
			t.Errorf("run %d: Trimmed() = %d, want %d", run, got, want)
		}
		w.Close(ctx)
		for name, want := range map[string][]int64{"k_a": {0, 2}, "k_b": {1}, "rest": {5}} {
			if got := l.scanNamed(t, name)["0"]; !slices.Equal(got, want) {
				t.Errorf("run %d: table %s holds %v, want %v", run, name, got, want)
			}
		}
	}
}
