package cli

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStopWithinBound: a stop whose work never returns (a call that
// ignores its context) ends at the bound with errStopTimedOut and the
// goroutines' stacks, naming the stuck function; a stop that finishes in
// time returns its own result, and nothing is dumped.
func TestStopWithinBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stuck := make(chan struct{})
	defer close(stuck)
	var dump bytes.Buffer
	cancel()
	err := stopWithin(ctx, 100*time.Millisecond, &dump, func() error { return stuckInAStop(stuck) })
	if !errors.Is(err, errStopTimedOut) {
		t.Fatalf("stopWithin = %v, want errStopTimedOut", err)
	}
	if !strings.Contains(dump.String(), "stuckInAStop") {
		t.Errorf("the dump does not show the stuck goroutine:\n%s", dump.String())
	}

	dump.Reset()
	want := errors.New("drain incomplete")
	ctx, cancel = context.WithCancel(context.Background())
	err = stopWithin(ctx, time.Minute, &dump, func() error {
		cancel()
		return want
	})
	if err != want || dump.Len() != 0 {
		t.Fatalf("stopWithin = %v with %d bytes dumped, want the run's own error and no dump", err, dump.Len())
	}
}

// stuckInAStop blocks until release is closed, as a call that ignores its
// context would.
func stuckInAStop(release <-chan struct{}) error {
	<-release
	return nil
}
