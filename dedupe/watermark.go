package dedupe

import (
	"sort"

	"github.com/ehsink/ehsink/sinks"
)

// After returns the suffix of events (sorted by sequence number, as a
// partition delivers them) that the watermark w does not cover. A nil
// watermark covers nothing. The result shares memory with events.
func After(events []sinks.Event, w *sinks.Position) []sinks.Event {
	if w == nil || len(events) == 0 {
		return events
	}
	i := sort.Search(len(events), func(i int) bool {
		return events[i].SequenceNumber > w.SequenceNumber
	})
	return events[i:]
}
