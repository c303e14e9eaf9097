// Package commit holds what the table sinks (Iceberg, Delta) share about
// their commits: the outcome a writer waits for while another writer of
// the same process makes its commit with its own (a group commit), and
// the failure a test hook injects at a step of a commit.
package commit

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Outcome is the result of one writer's queued commit. Whoever makes the
// commit sets it once, with Finish; the writer waits for it to be set.
// Make one with NewOutcome.
type Outcome struct {
	done chan struct{}
	// Set by Finish, read after Finished reports true: the table holds
	// the writer's files (OK), or Err, and whether the commit may have
	// been made all the same (Unknown: the answer was lost).
	OK      bool
	Unknown bool
	Err     error
}

// NewOutcome returns an Outcome not yet set.
func NewOutcome() Outcome { return Outcome{done: make(chan struct{})} }

// Finished reports whether the outcome has been set.
func (o *Outcome) Finished() bool {
	select {
	case <-o.done:
		return true
	default:
		return false
	}
}

// Finish sets the outcome. It must be called once.
func (o *Outcome) Finish(ok, unknown bool, err error) {
	o.OK, o.Unknown, o.Err = ok, unknown, err
	close(o.done)
}

// StepError is a failure a test hook injected at a step of a commit: the
// flush stops there, as the process would have.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

// LockTurn takes mu, a table's commit turn, or gives up when ctx ends with
// its cause: a flush queued behind a commit or maintenance that hangs on
// an unreachable store is bounded by its own call's sink timeout, not by
// how long the other one hangs. (sync.Mutex has no Lock with a context; a
// turn is held for a commit, tens of milliseconds, so polling for it
// costs nothing that matters.)
func LockTurn(ctx context.Context, mu *sync.Mutex) error {
	if mu.TryLock() {
		return nil
	}
	t := time.NewTicker(turnPoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-t.C:
			if mu.TryLock() {
				return nil
			}
		}
	}
}

// turnPoll is how often LockTurn tries the mutex again.
const turnPoll = 2 * time.Millisecond

// Withdraw ends a commit whose writer's call ended while it waited for the
// turn (LockTurn failed). A commit still in queue (which qmu guards) is
// taken out: it was never made (made and unknown both false). One that the
// writer with the turn took is that writer's: made once it finished, its
// outcome o then standing; unknown when it may have been made (not
// finished yet, or finished with an outcome lost), so that the retry finds
// out from the table.
func Withdraw[R comparable](qmu *sync.Mutex, queue *[]R, req R, o *Outcome) (made, unknown bool) {
	qmu.Lock()
	queued := slices.Contains(*queue, req)
	*queue = slices.DeleteFunc(*queue, func(r R) bool { return r == req })
	qmu.Unlock()
	switch {
	case queued:
		return false, false
	case o.Finished():
		return true, o.Unknown
	}
	return false, true
}
