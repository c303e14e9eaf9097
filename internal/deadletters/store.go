package deadletters

import (
	"context"
	"strings"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// Letter is one stored dead letter: the event as received, why it was
// refused, and whether a replay has since written it.
type Letter struct {
	// ID identifies the letter in its store.
	ID int64
	// Connector is the connector that refused the event.
	Connector string
	// Table is the table the connector wrote ("*" for a routed one).
	Table string
	// Event is the event as received: its Body is the payload as it came.
	Event sinks.Event
	// Reason says why the event was refused (the last time it was tried).
	Reason string
	// FailedAt is when it was refused (the last time).
	FailedAt time.Time
	// Revision is the configuration revision that refused it; empty for a
	// letter stored before revisions were kept.
	Revision string
	// ReplayedAt is when a replay wrote the event, or nil.
	ReplayedAt *time.Time
}

// Filter selects letters of the store's connector (a store is built for
// one, and a table shared by several connectors is read for its letters
// only). The zero value selects every letter not yet replayed.
type Filter struct {
	// Reason, when set, selects letters whose reason contains it.
	Reason string
	// Since, when set, selects letters that failed at or after it.
	Since time.Time
	// ID, when non-zero, selects that letter only.
	ID int64
	// Replayed also selects letters already replayed.
	Replayed bool
}

// Selects reports whether f selects l (the connector aside: a store reads
// its own).
func (f Filter) Selects(l *Letter) bool {
	return (f.Reason == "" || strings.Contains(l.Reason, f.Reason)) &&
		(f.Since.IsZero() || !l.FailedAt.Before(f.Since)) &&
		(f.ID == 0 || f.ID == l.ID) &&
		(f.Replayed || l.ReplayedAt == nil)
}

// Count is how many letters share a connector, partition and reason.
type Count struct {
	Connector, Partition, Reason string
	// Letters counts them; Replayed how many of those were replayed.
	Letters, Replayed int64
	// First and Last are the earliest and latest FailedAt among them.
	First, Last time.Time
}

// Row is one row a replayed letter writes (or would write, in a dry run).
type Row struct {
	// Table is the table the row goes to.
	Table string
	// Columns and Values are the row's mapped columns, in mapping order.
	Columns []string
	Values  []any
	// Delete says the row deletes its key (Values hold the key) instead
	// of writing it.
	Delete bool
}

// Outcome is what a replay made of one letter.
type Outcome struct {
	// Rows are the rows written (or, in a dry run, that would be).
	Rows []Row
	// Dropped says the connector's filter dropped the event: the letter
	// is marked replayed (unless Unmarked) and writes nothing.
	Dropped bool
	// Unmarked says a dropped letter could not be marked (its sink's
	// writers store no dead letters): the next replay drops it again.
	Unmarked bool
	// Reason, when set, is why the event fails again; the letter stays,
	// with this reason.
	Reason string
	// AlreadyReplayed says another replay marked the letter (or a letter
	// of the same event) first: nothing was written.
	AlreadyReplayed bool
}

// ReplayOptions configure one letter's replay.
type ReplayOptions struct {
	// DryRun maps the event and reports the outcome, and writes nothing.
	DryRun bool
	// Drop says the connector's current filter drops the event.
	Drop bool
	// Refused, when set, is why the connector cannot take the event (its
	// filter could not decide on it, its Avro body cannot be decoded): it
	// fails again with this reason.
	Refused string
	// Revision is the configuration revision replaying it: a letter that
	// fails again is stored with it.
	Revision string
}

// Store is a sink's dead-letter store as the deadletters commands use it.
// Implementations are safe for concurrent use.
type Store interface {
	// Counts returns the letters f selects, counted by connector,
	// partition and reason.
	Counts(ctx context.Context, f Filter) ([]Count, error)
	// Letters returns the letters f selects, oldest first.
	Letters(ctx context.Context, f Filter) ([]Letter, error)
	// Replay re-runs l's event through the sink's current mapping and
	// writes its rows. The letter is marked replayed in the commit that
	// writes them, so a replay stopped at any moment and run again writes
	// each row once; the sink's watermarks are left alone. An event that
	// fails again leaves its letter in place with the new reason. The
	// error is for everything else (the store unreachable).
	Replay(ctx context.Context, l *Letter, o ReplayOptions) (Outcome, error)
}
