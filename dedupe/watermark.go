package dedupe

import (
	"sort"

	"github.com/ehsink/ehsink/sinks"
)

// Covers reports whether the watermark w (nil: nothing committed) already
// includes the event with sequence number seq.
func Covers(w *sinks.Position, seq int64) bool {
	return w != nil && seq <= w.SequenceNumber
}

// Later returns the later of two positions by sequence number; nil counts
// as earlier than any position.
func Later(a, b *sinks.Position) *sinks.Position {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case b.SequenceNumber > a.SequenceNumber:
		return b
	default:
		return a
	}
}

// After returns the suffix of events (sorted by sequence number, as a
// partition delivers them) that the watermark w does not cover: what a
// writer still has to write after a replay. A nil watermark covers
// nothing. The result shares memory with events.
//
// It is also the fence: called inside the commit (the same transaction,
// or under the same lock) with the watermark read there, it drops what
// another writer of the partition committed since this one opened.
func After(events []sinks.Event, w *sinks.Position) []sinks.Event {
	if w == nil || len(events) == 0 {
		return events
	}
	i := sort.Search(len(events), func(i int) bool {
		return events[i].SequenceNumber > w.SequenceNumber
	})
	return events[i:]
}
