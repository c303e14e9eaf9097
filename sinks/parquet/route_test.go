package parquet

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// Paths of the routed test sink: customers c-0..c-2 go to low/, the others
// to high/cust=CUSTOMER/.
const (
	lowPath  = "low/partition={partition}/{partition}-{first_seq:020}-{last_seq:020}.parquet"
	highPath = "high/cust={$.customer}/partition={partition}/{partition}-{first_seq:020}-{last_seq:020}.parquet"
)

// routed makes newSink's config a routed one.
func routed(t testing.TB) func(*sinkConfig) {
	return func(c *sinkConfig) {
		c.Routes = []routeConfig{
			{Name: "low", When: `$.customer in ['c-0', 'c-1', 'c-2']`, Path: lowPath, Columns: kitColumns(t)},
			{Path: highPath, Columns: kitColumns(t)},
		}
		c.Columns = nil
	}
}

func lowCustomer(seq int64) bool { return seq%7 <= 2 }

// wantRouted checks that the files of each route hold each of from..to of
// that route exactly once (except the dead-lettered ones), every row of
// high/ in its customer's folder.
func wantRouted(t *testing.T, d destination, partition string, from, to int64, deadLettered ...int64) {
	t.Helper()
	low := committedSeqsUnder(t, d, partition, "low/", nil)
	high := committedSeqsUnder(t, d, partition, "high/", func(name string, row map[string]any) {
		if c := row["customer"].(string); !strings.HasPrefix(name, "high/cust="+c+"/") {
			t.Fatalf("%s holds a row of customer %s", name, c)
		}
	})
	var wantLow, wantHigh []int64
	for s := from; s <= to; s++ {
		switch {
		case slices.Contains(deadLettered, s):
		case lowCustomer(s):
			wantLow = append(wantLow, s)
		default:
			wantHigh = append(wantHigh, s)
		}
	}
	slices.Sort(low)
	slices.Sort(high)
	if !slices.Equal(low, wantLow) || !slices.Equal(high, wantHigh) {
		t.Fatalf("partition %s: low/ holds %v, high/ %v; want low %v, high %v", partition, low, high, wantLow, wantHigh)
	}
}

func TestRoutedConfigValidate(t *testing.T) {
	cols := kitColumns(t)
	for _, tc := range []struct {
		name   string
		routes []routeConfig
		edit   func(*sinkConfig)
		want   []string
	}{
		{"valid", []routeConfig{{When: `$.a == 1`, Path: lowPath, Columns: cols}, {Path: highPath, Columns: cols}}, nil, nil},
		{"problems", []routeConfig{
			{When: `$.a = 1`, Path: lowPath, Columns: cols},
			{Path: "x/{$.a}/{partition}-{first_seq}.parquet", Columns: cols},
			{When: `$.b == 1`, Path: lowPath},
		}, nil, []string{"routes[0].when", "routes[1].path", "routes[2].when", "routes[2].path", "routes[2].columns"}},
		{"sink columns and a value in the sink path", []routeConfig{{Path: lowPath, Columns: cols}}, func(c *sinkConfig) {
			c.Columns = cols
			c.Path = highPath
		}, []string{"columns", "path"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig()
			c.Dir = t.TempDir()
			c.Routes = tc.routes
			if tc.edit != nil {
				tc.edit(c)
			}
			var got []string
			for _, e := range flatten(c.Validate()) {
				var fe *sinks.FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("problem without a field: %v", e)
				}
				got = append(got, fe.Field)
			}
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return g == w || strings.HasPrefix(g, w+".") }) {
					t.Errorf("want a problem at %s, got %v", w, got)
				}
			}
			if tc.want == nil && got != nil {
				t.Errorf("want no problem, got %v", got)
			}
		})
	}
}

// TestRoutedFiles writes 0..99 through two routes in commits of 30
// events: each route's files hold its events once, every file of a commit
// is named with the commit's range, a path value that is not allowed and a
// value that does not convert are dead letters, and a reopened writer
// resumes after the last commit.
func TestRoutedFiles(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, routed(t))
		events := sinktest.Events("0", 0, 99)
		events[10] = badEvent(events[10])
		events[40].Body = []byte(strings.Replace(string(events[40].Body), `"customer":"c-5"`, `"customer":"../c-5"`, 1))
		w, _ := open(t, s, "0")
		var reasons []string
		for i := 0; i < len(events); i += 10 {
			err := w.Write(ctxT(t), events[i:i+10])
			var be *sinks.BatchError
			if errors.As(err, &be) {
				for _, f := range be.Failed {
					reasons = append(reasons, f.Err.Error())
					if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: events[i+f.Index], Reason: f.Err.Error()}}); err != nil {
						t.Fatal(err)
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if i%30 == 20 || i == 90 {
				flush(t, w)
			}
		}
		w.Close(ctxT(t))
		wantRouted(t, d, "0", 0, 99, 10, 40)
		if got := deadLetterSeqs(t, d); !slices.Equal(got, []int64{10, 40}) {
			t.Fatalf("dead letters %v, want [10 40]", got)
		}
		if len(reasons) != 2 || !strings.Contains(reasons[1], `path: {$.customer} is "../c-5": starts with . or _`) {
			t.Fatalf("dead-letter reasons %q", reasons)
		}
		// Every file of a commit carries its range: 0..29, 30..59, 60..89, 90..99.
		ranges := map[string]bool{}
		for name := range d.files(t) {
			if isParquet(name) {
				base := name[strings.LastIndexByte(name, '/')+1:]
				ranges[base[strings.IndexByte(base, '-')+1:]] = true
			}
		}
		if len(ranges) != 4 {
			t.Fatalf("data files of %d ranges %v, want the 4 commits'", len(ranges), ranges)
		}
		w2, wm := open(t, s, "0")
		defer w2.Close(ctxT(t))
		if wm == nil || wm.SequenceNumber != 99 || wm.Offset != events[99].Offset {
			t.Fatalf("watermark after reopening = %+v, want 99 at offset %s", wm, events[99].Offset)
		}
	})
}

// TestRoutedDeadLettersOnlyCommit: a routed commit of dead letters only
// writes no data file, and its dead-letter file holds the watermark.
func TestRoutedDeadLettersOnlyCommit(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, routed(t))
	events := sinktest.Events("0", 0, 9)
	w, _ := open(t, s, "0")
	writeAll(t, w, events[:5])
	flush(t, w)
	if err := w.DeadLetter(ctxT(t), []sinks.DeadLetter{{Event: badEvent(events[5]), Reason: "bad"}}); err != nil {
		t.Fatal(err)
	}
	flush(t, w)
	w.Close(ctxT(t))
	w, wm := open(t, s, "0")
	defer w.Close(ctxT(t))
	if wm == nil || wm.SequenceNumber != 5 {
		t.Fatalf("watermark = %+v, want 5 (the dead letter's commit)", wm)
	}
	replay(t, w, nil, wm, events)
	wantRouted(t, d, "0", 0, 9, 5)
}

// TestRoutedPartialCommitFinishedByOpen: a writer that dies after
// publishing some of a commit's files leaves a watermark that looks
// complete; the next Open publishes the rest from the claim.
func TestRoutedPartialCommitFinishedByOpen(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, routed(t))
	events := sinktest.Events("0", 0, 29)
	w, _ := open(t, s, "0")
	writeAll(t, w, events)
	links := 0
	s.traceSteps(func(step, p string) {
		if step == "link" && strings.HasSuffix(p, ".parquet") {
			if links++; links == 2 {
				panic(errStop) // stands for the process dying here
			}
		}
	})
	func() {
		defer func() {
			if r := recover(); r != errStop {
				panic(r)
			}
		}()
		w.Flush(ctxT(t))
		t.Fatal("the flush was not stopped")
	}()
	s.traceSteps(nil)
	if n := len(committedSeqs(t, d, "0")); n == 0 || n == 30 {
		t.Fatalf("%d rows visible after the stop, want part of the commit", n)
	}
	s2 := newSink(t, d, routed(t))
	w2, wm := open(t, s2, "0")
	defer w2.Close(ctxT(t))
	if wm == nil || wm.SequenceNumber != 29 {
		t.Fatalf("watermark = %+v, want 29", wm)
	}
	wantRouted(t, d, "0", 0, 29)
	if left := d.temps(t); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}

var errStop = errors.New("stop")

// TestRoutedConformance runs the conformance kit on a routed sink (local
// files): restarts, replays, fencing and dead letters hold with a commit
// spread over several files. Rows of several files are read back in
// sequence order.
func TestRoutedConformance(t *testing.T) {
	dests := map[string]destination{}
	get := func(t *testing.T) destination {
		if d, ok := dests[t.Name()]; ok {
			return d
		}
		d := localDestination(t)
		dests[t.Name()] = d
		return d
	}
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinks.Sink { return newSink(t, get(t), routed(t)) },
		Committed: func(t *testing.T, partition string) []int64 {
			seqs := committedSeqs(t, get(t), partition)
			slices.Sort(seqs)
			return seqs
		},
		BadEvent: func(partition string, seq int64) sinks.Event {
			e := sinktest.Event(partition, seq)
			e.Body = []byte(`{"id":"bad","seq":4,"customer":"c","amount":"not a number","ts":"2026-01-02T03:04:05Z"}`)
			return e
		},
		Fencing: true,
	})
}

// TestRoutedPathOfTwoRoutes: an event whose path value makes another
// route's file name in the same commit is a dead letter; and the commit
// rolls once it has max_open_files files.
func TestRoutedPathOfTwoRoutes(t *testing.T) {
	d := localDestination(t)
	s := newSink(t, d, func(c *sinkConfig) {
		c.Routes = []routeConfig{
			{Name: "fixed", When: `$.customer == 'c-0'`, Path: "low/partition={partition}/{partition}-{first_seq}-{last_seq}.parquet", Columns: kitColumns(t)},
			{Path: "{$.customer}/partition={partition}/{partition}-{first_seq}-{last_seq}.parquet", Columns: kitColumns(t)},
		}
		c.Columns = nil
		c.MaxOpenFiles = 3
	})
	events := sinktest.Events("0", 0, 2) // customers c-0, c-1, c-2
	events[1].Body = []byte(strings.Replace(string(events[1].Body), `"customer":"c-1"`, `"customer":"low"`, 1))
	w, _ := open(t, s, "0")
	defer w.Close(ctxT(t))
	var be *sinks.BatchError
	if err := w.Write(ctxT(t), events); !errors.As(err, &be) || len(be.Failed) != 1 || be.Failed[0].Index != 1 ||
		!strings.Contains(be.Failed[0].Err.Error(), "is route fixed's file in this commit") {
		t.Fatalf("Write = %v, want event 1 refused for naming route fixed's file", err)
	}
	if w.FlushDue(s.now()) {
		t.Fatal("FlushDue with 2 files, want false below max_open_files 3")
	}
	writeAll(t, w, sinktest.Events("0", 3, 3)) // c-3: a third file
	if !w.FlushDue(s.now()) {
		t.Fatal("FlushDue with 3 files = false, want true at max_open_files")
	}
}
