package sinktest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/sinks"
)

// memoryHarness gives each test case its own Memory sink, made by fresh.
func memoryHarness(fresh func() *Memory) Harness {
	var mu sync.Mutex
	sinksByTest := map[string]*Memory{}
	get := func(t *testing.T) *Memory {
		mu.Lock()
		defer mu.Unlock()
		m, ok := sinksByTest[t.Name()]
		if !ok {
			m = fresh()
			m.SetReject(func(ev *sinks.Event) error {
				if string(ev.Body) == "not json" {
					return errors.New("body is not JSON")
				}
				return nil
			})
			sinksByTest[t.Name()] = m
		}
		return m
	}
	return Harness{
		New:       func(t *testing.T) sinks.Sink { return get(t) },
		Committed: func(t *testing.T, p string) []int64 { return get(t).Committed(p) },
		BadEvent: func(p string, seq int64) sinks.Event {
			ev := Event(p, seq)
			ev.Body = []byte("not json")
			return ev
		},
		Fencing: true,
		InterruptCommit: func(t *testing.T, s sinks.Sink) {
			var once sync.Once
			s.(*Memory).SetFault(func(point FaultPoint, _ string) error {
				var err error
				if point == BeforeWatermark {
					once.Do(func() { err = errors.New("killed between data and watermark") })
				}
				return err
			})
		},
	}
}

func TestKitAgainstMemory(t *testing.T) {
	Run(t, memoryHarness(NewMemory))
}

// recorder is the testing.TB a case runs on in the kit's own tests: it
// records failures instead of failing the test, and ends the case on
// Fatal/FailNow/Skip as the testing package does (runtime.Goexit), so the
// case must run in a goroutine of its own (see runCase). Everything else
// (Name, Cleanup, Logf, TempDir) is the real test's.
type recorder struct {
	*testing.T
	mu       sync.Mutex
	failures []string
	skipped  bool
}

func (r *recorder) harnessT() *testing.T { return r.T }

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	r.failures = append(r.failures, msg)
	r.mu.Unlock()
}

func (r *recorder) Fail()                       { r.fail("Fail") }
func (r *recorder) FailNow()                    { r.fail("FailNow"); runtime.Goexit() }
func (r *recorder) Error(args ...any)           { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, a ...any)   { r.fail(fmt.Sprintf(f, a...)) }
func (r *recorder) Fatal(args ...any)           { r.fail(fmt.Sprint(args...)); runtime.Goexit() }
func (r *recorder) Fatalf(f string, a ...any)   { r.fail(fmt.Sprintf(f, a...)); runtime.Goexit() }
func (r *recorder) SkipNow()                    { r.skipped = true; runtime.Goexit() }
func (r *recorder) Skip(args ...any)            { r.SkipNow() }
func (r *recorder) Skipf(f string, args ...any) { r.SkipNow() }
func (r *recorder) Skipped() bool               { return r.skipped }

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.failures) > 0
}

// runCase runs the kit case named name against h on a recorder and
// returns what it recorded.
func runCase(t *testing.T, name string, h Harness) *recorder {
	t.Helper()
	i := slices.IndexFunc(cases, func(c kitCase) bool { return c.name == name })
	if i < 0 {
		t.Fatalf("no kit case %q", name)
	}
	if cases[i].skip(h) != "" {
		t.Fatalf("kit case %q would be skipped for this harness", name)
	}
	r := &recorder{T: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		cases[i].run(r, h)
	}()
	<-done
	return r
}

// TestKitCatchesBrokenSinks runs cases against sinks that break the
// contract: each case must fail on them (and passes on Memory, above).
func TestKitCatchesBrokenSinks(t *testing.T) {
	unfenced := func() *Memory {
		m := NewMemory()
		m.SetFencing(false)
		return m
	}
	forgetful := Harness{
		// Loses its state on every New.
		New:       func(t *testing.T) sinks.Sink { return NewMemory() },
		Committed: func(t *testing.T, p string) []int64 { return nil },
	}
	// Refuses a partition ID that is not a number.
	numericOnly := memoryHarness(NewMemory)
	memoryNew := numericOnly.New
	numericOnly.New = func(t *testing.T) sinks.Sink { return numericSink{memoryNew(t)} }
	tests := []struct {
		sink  string
		h     Harness
		cases []string
	}{
		{"forgetful", forgetful, []string{"RestartResumesFromWatermark", "ReplayWritesNothingTwice", "DeadLetterReplay"}},
		{"numeric partitions only", numericOnly, []string{"DeadLetterReplay"}},
		{"fence removed", memoryHarness(unfenced), []string{
			"TwoOwnersAtOnce",
			"TwoOwnersFromWatermark",
			"StaleOwnerFlushesLate",
			"CrashBetweenDataAndWatermark",
		}},
	}
	for _, tt := range tests {
		for _, name := range tt.cases {
			t.Run(tt.sink+"/"+name, func(t *testing.T) {
				r := runCase(t, name, tt.h)
				if !r.Failed() {
					t.Fatalf("case %s passed against a sink that is %s", name, tt.sink)
				}
				t.Logf("caught: %s", strings.Join(r.failures, "; "))
			})
		}
	}
}

// TestRecorderPassesGoodCases: the same cases recorded against Memory
// record nothing, so a failure above is the broken sink's.
func TestRecorderPassesGoodCases(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if r := runCase(t, c.name, memoryHarness(NewMemory)); r.Failed() || r.skipped {
				t.Fatalf("failed %v (skipped %v) against Memory", r.failures, r.skipped)
			}
		})
	}
}

// TestSkipsNameTheirHarnessField: a case that cannot run says which
// Harness field would enable it, so a sink author sees what is not tested.
func TestSkipsNameTheirHarnessField(t *testing.T) {
	full := memoryHarness(NewMemory)
	for _, c := range cases {
		if why := c.skip(full); why != "" {
			t.Errorf("%s is skipped with every capability declared: %s", c.name, why)
		}
	}
	bare := Harness{New: full.New, Committed: full.Committed}
	want := map[string]string{
		"RejectedEvent":                "Harness.BadEvent",
		"TwoOwnersAtOnce":              "Harness.Fencing",
		"TwoOwnersFromWatermark":       "Harness.Fencing",
		"StaleOwnerFlushesLate":        "Harness.Fencing",
		"CrashBetweenDataAndWatermark": "Harness.InterruptCommit is not set",
	}
	for _, c := range cases {
		why := c.skip(bare)
		if w, ok := want[c.name]; ok != (why != "") || !strings.Contains(why, w) {
			t.Errorf("%s without capabilities: skip %q, want one naming %q", c.name, why, w)
		}
	}
	if why := noInterruptCommit(bare); !strings.Contains(why, "docs/writing-a-sink.md") {
		t.Errorf("the InterruptCommit skip does not point to the worked example: %q", why)
	}
}

// TestWatermarksPrintAsSeqAndOffset: a failure shows a watermark as
// "seq N (offset O)", not as a Go struct.
func TestWatermarksPrintAsSeqAndOffset(t *testing.T) {
	forgetful := Harness{
		New:       func(t *testing.T) sinks.Sink { return NewMemory() },
		Committed: func(t *testing.T, p string) []int64 { return nil },
	}
	r := runCase(t, "RestartResumesFromWatermark", forgetful)
	if len(r.failures) != 1 || r.failures[0] != "watermark none, want seq 19" {
		t.Errorf("failures %q, want one: watermark none, want seq 19", r.failures)
	}
	if got := fmtWatermark(&sinks.Position{SequenceNumber: 40, Offset: "40000"}); got != "seq 40 (offset 40000)" {
		t.Errorf("fmtWatermark = %q", got)
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in   []int64
		want string
	}{
		{nil, "[]"},
		{[]int64{1}, "[1]"},
		{[]int64{0, 1, 2, 5, 7, 8}, "[0-2 5 7-8]"},
	}
	for _, tt := range tests {
		if got := summarize(tt.in); got != tt.want {
			t.Errorf("summarize(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// numericSink refuses to open a partition whose ID is not a number.
type numericSink struct{ sinks.Sink }

func (s numericSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if _, err := strconv.Atoi(partition); err != nil {
		return nil, nil, fmt.Errorf("partition %q: not a number", partition)
	}
	return s.Sink.Open(ctx, partition)
}
