package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// deadLetterColumns are the columns of the dead-letter table: where the
// letter comes from, its event's position, the reason, and the letter
// whole as a line of JSON (the form of the runner's dead-letter files:
// body, properties, key).
func deadLetterColumns() mapping.Columns {
	col := func(name, typ string, nullable bool) mapping.Column {
		t, err := mapping.ParseType(typ)
		if err != nil {
			panic(fmt.Sprintf("dead-letter column %s: %v", name, err)) // a constant type name
		}
		return mapping.Column{Name: name, Type: t, Nullable: nullable}
	}
	return mapping.Columns{
		col("connector", "string", false),
		col("eventhub", "string", false),
		col("consumer_group", "string", false),
		col("partition", "string", false),
		col("sequence_number", "int64", false),
		col("offset", "string", false),
		col("enqueued_time", "timestamp", true),
		col("partition_key", "string", true),
		col("reason", "string", false),
		col("failed_at", "timestamp", false),
		col("record", "json", false),
	}
}

var _ sinks.DeadLetterer = (*writer)(nil)

// DeadLetter adds letters to the dead-letter table's share of the next
// Flush, which commits them before the data, with the partition's
// watermark in that table: a letter the table already holds (a replay of
// an abandoned flush) is skipped, so each is stored once.
func (w *writer) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	p := w.dl
	if p.record != nil {
		return fmt.Errorf("dead letters after a failed flush: flush again first")
	}
	for i := range letters {
		l := &letters[i]
		if dedupe.Covers(p.watermark, l.Event.SequenceNumber) {
			continue
		}
		vals := letterRow(w.s.info, w.partition, l, deadletters.Revision(ctx))
		if err := p.rows.check(vals); err != nil {
			return fmt.Errorf("dead letter of seq %d: %w", l.Event.SequenceNumber, err)
		}
		p.rows.add(vals)
	}
	return nil
}

// letterRow is the dead-letter table's row of l, a letter of partition
// refused by configuration revision rev.
func letterRow(info sinks.Info, partition string, l *sinks.DeadLetter, rev string) []any {
	ev := &l.Event
	var enq, key any
	if !ev.EnqueuedTime.IsZero() {
		enq = ev.EnqueuedTime
	}
	if ev.PartitionKey != nil {
		key = *ev.PartitionKey
	}
	return []any{info.Connector, info.EventHub, info.ConsumerGroup, partition, ev.SequenceNumber, ev.Offset,
		enq, key, l.Reason, l.FailedAt, strings.TrimSuffix(string(record.AppendDeadLetter(nil, l, rev)), "\n")}
}
