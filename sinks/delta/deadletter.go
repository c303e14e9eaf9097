package delta

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// The dead letters of a sink go to a Delta table of their own (by default
// the table's folder + "_dead_letters"), one row per letter, written by a
// sink of this package for that table: its writer of the partition takes
// the letters, and Flush commits them, with the partition's txn in that
// table, just before the data. A flush replayed after a failure between
// the two commits gives the letter writer letters its txn covers, which
// it skips, as any writer skips what it committed; a stale owner is
// fenced by either table. Each letter is stored once.

// deadLetterColumns are the dead-letter table's columns, mapped from the
// event a letter becomes (letterEvent).
func deadLetterColumns() (mapping.Columns, error) {
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"partition", "@partition", "string"},
		{"sequence_number", "@sequence_number", "int64"},
		{"offset", "@offset", "string"},
		{"enqueued_time", "@enqueued_time", "timestamp"},
		{"partition_key", "@partition_key", "string"},
		{"reason", "$.reason", "string"},
		{"failed_at", "$.failed_at", "timestamp"},
		{"record", "$.record", "json"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			return nil, err
		}
		cols = append(cols, col)
	}
	return cols, nil
}

// letterEvent is the event whose row is the letter's: the letter's event
// with a body holding the reason, when the runner gave up, and the whole
// letter as the JSON line of the dead-letter files (body and properties
// included).
func letterEvent(d *sinks.DeadLetter, revision string) (sinks.Event, error) {
	body, err := json.Marshal(struct {
		Reason   string          `json:"reason"`
		FailedAt string          `json:"failed_at"`
		Record   json.RawMessage `json:"record"`
	}{d.Reason, d.FailedAt.UTC().Format("2006-01-02T15:04:05.999999Z07:00"), record.AppendDeadLetter(nil, d, revision)})
	if err != nil {
		return sinks.Event{}, err
	}
	e := d.Event
	e.Body, e.Properties = body, nil
	return e, nil
}

// DeadLetter adds letters to what the next Flush commits, in the
// dead-letter table; letters that table's txn already covers (a replay)
// are skipped.
func (w *writer) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	if w.dl == nil {
		return fmt.Errorf("connector %q partition %s: table %s: no dead-letter table", w.s.info.Connector, w.partition, w.s.cfg.Table)
	}
	if err := writeLetters(ctx, w.dl, letters); err != nil {
		return err
	}
	// A letter of an event Write never saw (the runner gave up on it
	// before the sink) is taken as an event without rows: the next
	// commit's txn covers it, so the watermark moves past it once its
	// letter is stored.
	for i := range letters {
		w.take(&letters[i].Event)
	}
	return nil
}

// writeLetters adds letters to what dl, a dead-letter table's writer,
// commits next.
func writeLetters(ctx context.Context, dl *writer, letters []sinks.DeadLetter) error {
	evs := make([]sinks.Event, 0, len(letters))
	for i := range letters {
		e, err := letterEvent(&letters[i], deadletters.Revision(ctx))
		if err != nil {
			return fmt.Errorf("dead letter of seq %d: %w", letters[i].Event.SequenceNumber, err)
		}
		evs = append(evs, e)
	}
	if err := dl.Write(ctx, evs); err != nil {
		return fmt.Errorf("dead-letter table %s: %w", dl.s.cfg.Table, err)
	}
	return nil
}
