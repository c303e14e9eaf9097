package sinktest

import (
	"errors"
	"sync"
	"testing"

	"github.com/ehsink/ehsink/sinks"
)

// memoryHarness gives each test case its own Memory sink.
func memoryHarness() Harness {
	var mu sync.Mutex
	sinksByTest := map[string]*Memory{}
	get := func(t *testing.T) *Memory {
		mu.Lock()
		defer mu.Unlock()
		m, ok := sinksByTest[t.Name()]
		if !ok {
			m = NewMemory()
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
	}
}

func TestKitAgainstMemory(t *testing.T) {
	Run(t, memoryHarness())
}

// brokenSink forgets everything on reopen; the kit must catch it.
type forgetful struct{ *Memory }

func TestKitCatchesForgetfulSink(t *testing.T) {
	// Run the restart case by hand against a sink that loses its state on
	// every New: the case must fail.
	h := Harness{
		New: func(t *testing.T) sinks.Sink { return forgetful{NewMemory()} },
		Committed: func(t *testing.T, p string) []int64 {
			return nil
		},
	}
	ft := &testing.T{}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		defer func() { _ = recover() }()
		caseRestartResumes(ft, h)
	}()
	<-ran
	if !ft.Failed() {
		t.Fatal("the restart case passed against a sink that forgets its state")
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
