package deadletters

import "strings"

// Selects reports whether f selects l (the connector aside: a store reads
// its own).
func (f Filter) Selects(l *Letter) bool {
	return (f.Reason == "" || strings.Contains(l.Reason, f.Reason)) &&
		(f.Since.IsZero() || !l.FailedAt.Before(f.Since)) &&
		(f.ID == 0 || f.ID == l.ID) &&
		(f.Replayed || l.ReplayedAt == nil)
}
