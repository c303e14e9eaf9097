// Package commit holds what the table sinks (Iceberg, Delta) share about
// their commits: the outcome a writer waits for while another writer of
// the same process makes its commit with its own (a group commit), and
// the failure a test hook injects at a step of a commit.
package commit

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
