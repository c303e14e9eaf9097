package connector

import (
	"fmt"

	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
)

// FilterSpec is the connector's `filter:` block: conditions (package expr)
// that decide which events reach the sink. An event is written when Keep
// (if set) is true and Drop (if set) is false; the others are dropped. A
// dropped event is never written nor dead-lettered: it advances the
// checkpoint like a written event, once everything written before it is
// committed, and is counted in ehsink_events_filtered_total.
type FilterSpec struct {
	// Keep writes only the events for which it is true.
	Keep *expr.Expr `yaml:"keep"`
	// Drop drops the events for which it is true.
	Drop *expr.Expr `yaml:"drop"`
}

// Keeps reports whether ev passes the filter. A nil filter keeps every
// event. An error (a condition whose value is unknown: it reads a path of a
// body that is not valid JSON and the rest does not decide) names the
// condition; the event is then dead-lettered, not dropped.
//
// With format debezium (see [ChangeEvents]), a tombstone passes
// unevaluated: it carries nothing a condition could read, and the sink
// skips it, so it is neither written nor dead-lettered.
func (f *FilterSpec) Keeps(ev *sinks.Event, format cdc.Format) (bool, error) {
	if f == nil {
		return true, nil
	}
	if format == cdc.FormatDebezium && cdc.IsTombstone(ev.Body) {
		return true, nil
	}
	if f.Keep != nil {
		ok, err := f.Keep.Eval(ev)
		if err != nil {
			return false, fmt.Errorf("filter.keep: %w", err)
		}
		if !ok {
			return false, nil
		}
	}
	if f.Drop != nil {
		drop, err := f.Drop.Eval(ev)
		if err != nil {
			return false, fmt.Errorf("filter.drop: %w", err)
		}
		return !drop, nil
	}
	return true, nil
}

func (f *FilterSpec) validate(path string, p *problems) {
	if f.Keep == nil && f.Drop == nil {
		p.add(path, "set keep (a condition the events to write meet) or drop (a condition the events to drop meet)")
	}
}

// ChangeEvents returns the format of the events of a sink config that
// reads change events (the postgres sink's `format:`), or "" for one that
// does not say. The filter lets Debezium tombstones through to the sink,
// which skips them.
func ChangeEvents(sinkConfig any) cdc.Format {
	if c, ok := sinkConfig.(interface{ EventFormat() cdc.Format }); ok {
		return c.EventFormat()
	}
	return ""
}
