package backoff

import (
	"testing"
	"time"
)

func TestNextDoublesUpToMax(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Next(); got != w*time.Millisecond {
			t.Fatalf("wait %d: %s, want %s", i, got, w*time.Millisecond)
		}
	}
	b.Reset()
	if got := b.Next(); got != 100*time.Millisecond {
		t.Errorf("after Reset: %s, want the initial 100ms", got)
	}
}

func TestMaxBelowInitial(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: time.Millisecond}
	for range 3 {
		if got := b.Next(); got != time.Second {
			t.Fatalf("%s, want the initial 1s (a max below it is raised to it)", got)
		}
	}
}

func TestJitteredWithinTheWait(t *testing.T) {
	b := Backoff{Initial: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	for i := range 50 {
		limit := b.Peek()
		if got := b.Jittered(); got < 0 || got > limit {
			t.Fatalf("jittered wait %d: %s, want within [0, %s]", i, got, limit)
		}
	}
	if got := b.Peek(); got != 80*time.Millisecond {
		t.Errorf("after many: %s, want the max", got)
	}
}
