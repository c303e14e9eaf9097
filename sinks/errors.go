package sinks

import (
	"errors"
	"fmt"
	"strings"
)

// ErrClosed is returned by a sink or writer used after Close.
var ErrClosed = errors.New("sinks: closed")

// ErrFenced is returned (wrapped) by Flush when another writer of the same
// partition (a new owner after a steal) committed part of what this writer
// holds, and the writer cannot drop just the overlap. The writer has
// discarded what it held; the runner opens a new writer and reads on after
// its watermark, the newer commit, keeping the partition (once: fenced
// again, it gives the partition up without a checkpoint, as when the
// partition is lost). Sinks that can trim the overlap (a SQL transaction
// that re-reads its watermark) do that instead.
var ErrFenced = errors.New("sinks: another writer committed this partition")

// EventError is the failure of one event in a batch.
type EventError struct {
	// Index is the event's index in the batch passed to Write.
	Index int
	// Err says what is wrong with the event.
	Err error
}

// BatchError reports the events of one Write that could not be written. The
// other events of the batch were taken.
type BatchError struct {
	// Failed lists the events that could not be written, in batch order.
	Failed []EventError
}

// Error counts the failed events and names the first few.
func (e *BatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d event(s) could not be written", len(e.Failed))
	for i, f := range e.Failed {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failed)-i)
			break
		}
		fmt.Fprintf(&b, "; event %d: %v", f.Index, f.Err)
	}
	return b.String()
}

// RejectedEvent is an event the destination refused when it was committed,
// with the destination's reason.
type RejectedEvent struct {
	// Event is the event as it was given to Write, or as it was received
	// ([Event.Received]): a writer may keep only what the dead letter
	// needs. Its Body, RawBody and Properties belong to the writer until
	// its next Flush.
	Event Event
	// Err is the destination's reason, such as a row breaking a CHECK
	// constraint of a table.
	Err error
}

// RejectedError is returned (wrapped or not) by Flush when the destination
// refused events that Write had taken, for a reason only it could see: a
// row that breaks a CHECK, NOT NULL, unique or foreign-key rule of a
// table. The writer committed nothing and still holds every other event.
// It keeps the rejected ones apart and reports them again from every Flush
// until they are passed to its DeadLetter, which a [DeadLetterer] then
// commits with the data; a writer that is not a DeadLetterer drops them at
// the next Flush, after the runner stored them. The runner handles them as
// it handles a [*BatchError] from Write (dead letters, or a stop under
// errors.tolerance none) and calls Flush again.
type RejectedError struct {
	// Rejected lists the refused events.
	Rejected []RejectedEvent
}

// Error counts the rejected events and names the first few.
func (e *RejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d event(s) rejected at commit", len(e.Rejected))
	for i, r := range e.Rejected {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.Rejected)-i)
			break
		}
		fmt.Fprintf(&b, "; seq %d: %v", r.Event.SequenceNumber, r.Err)
	}
	return b.String()
}

// transientError marks an error worth retrying.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as transient: the operation may succeed if retried
// (connection refused or reset, server shutting down, serialization failure).
// Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// IsTransient reports whether err, or an error it wraps, was marked with
// [Transient].
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// FieldError is a config problem at a field path relative to the sink block,
// such as "table" or "columns.amount.type".
type FieldError struct {
	Field string // the path in the sink block, dot-separated
	Err   error  // what is wrong with the field
}

// Error is "field: problem".
func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }
