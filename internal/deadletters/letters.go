package deadletters

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// Selects reports whether f selects l (the connector aside: a store reads
// its own).
func (f Filter) Selects(l *Letter) bool {
	return (f.Reason == "" || strings.Contains(l.Reason, f.Reason)) &&
		(f.Since.IsZero() || !l.FailedAt.Before(f.Since)) &&
		(f.ID == 0 || f.ID == l.ID) &&
		(f.Replayed || l.ReplayedAt == nil)
}

// FromRecord reads a letter from its JSON line (record.DeadLetter, as the
// runner's files and the table sinks' record column hold it): the event
// as received, the reason, when and by which revision. Whole-number
// properties read back as int64, what Event Hubs' integer properties are,
// so that a mapping reads them as it read the event.
func FromRecord(line []byte) (Letter, error) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var r record.DeadLetter
	if err := d.Decode(&r); err != nil {
		return Letter{}, err
	}
	body := []byte(r.Body)
	if r.BodyEncoding == "base64" {
		var s string
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return Letter{}, fmt.Errorf("body: %w", err)
		}
		var err error
		if body, err = base64.StdEncoding.DecodeString(s); err != nil {
			return Letter{}, fmt.Errorf("body: %w", err)
		}
	}
	for k, v := range r.Properties {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				r.Properties[k] = i
			} else if f, err := n.Float64(); err == nil {
				r.Properties[k] = f
			}
		}
	}
	return Letter{
		Reason: r.Reason, FailedAt: r.FailedAt, Revision: r.Revision,
		Event: sinks.Event{Partition: r.Partition, SequenceNumber: r.SequenceNumber, Offset: r.Offset,
			EnqueuedTime: r.EnqueuedTime, PartitionKey: r.PartitionKey, ContentType: r.ContentType,
			Properties: r.Properties, Body: body},
	}, nil
}

// CountLetters counts letters by partition and reason, as Counts reports
// them for connector, in the order of the PostgreSQL store's list:
// partitions by number, the most frequent reason first.
func CountLetters(connector string, letters []Letter) []Count {
	type key struct{ partition, reason string }
	byKey := map[key]*Count{}
	var out []*Count
	for _, l := range letters {
		k := key{l.Event.Partition, l.Reason}
		c := byKey[k]
		if c == nil {
			c = &Count{Connector: connector, Partition: k.partition, Reason: k.reason, First: l.FailedAt, Last: l.FailedAt}
			byKey[k] = c
			out = append(out, c)
		}
		c.Letters++
		if l.ReplayedAt != nil {
			c.Replayed++
		}
		if l.FailedAt.Before(c.First) {
			c.First = l.FailedAt
		}
		if l.FailedAt.After(c.Last) {
			c.Last = l.FailedAt
		}
	}
	slices.SortFunc(out, func(a, b *Count) int {
		return cmp.Or(cmp.Compare(len(a.Partition), len(b.Partition)), cmp.Compare(a.Partition, b.Partition),
			cmp.Compare(b.Letters, a.Letters), cmp.Compare(a.Reason, b.Reason))
	})
	counts := make([]Count, len(out))
	for i, c := range out {
		counts[i] = *c
	}
	return counts
}
