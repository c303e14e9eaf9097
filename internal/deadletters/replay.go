package deadletters

import (
	"context"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/sinks"
)

// Replayer replays a connector's letters through its store: each selected
// letter's event is prepared as the running connector prepares it (its
// Avro body decoded), judged by the connector's filter, and handed to
// [Store.Replay]. `ehsink deadletters replay` and the operations API's
// replay action both run one, so they decide alike.
//
// The connector's parts come as functions: this package sits below the
// connector's (whose runner stores letters with [WithRevision]).
type Replayer struct {
	// Store holds the letters. Required.
	Store Store
	// Revision is the connector's configuration revision now, stored
	// with a letter that fails again.
	Revision string
	// Prepare, if set, readies an event for the filter and the mapping
	// as the running connector does (source.format avro: the body
	// decoded into JSON). refused is why it cannot be: the letter fails
	// again with it. err is for everything else (the registry
	// unreachable): the replay stops with it.
	Prepare func(ctx context.Context, ev *sinks.Event) (refused string, err error)
	// Keep, if set, is the connector's filter: whether it keeps ev, or
	// why it cannot tell. If nil, every event is kept.
	Keep func(ev *sinks.Event) (bool, error)
	// Report, if set, receives each letter's outcome, in order.
	Report func(l *Letter, out Outcome)
}

// Tally counts what a replay made of its letters.
type Tally struct {
	// Letters is how many letters were selected.
	Letters int `json:"letters"`
	// Replayed wrote their rows (in a dry run: would).
	Replayed int `json:"replayed"`
	// Dropped were dropped by the filter: marked replayed, no row.
	Dropped int `json:"dropped"`
	// FailedAgain stay, with their new reason.
	FailedAgain int `json:"failed_again"`
	// AlreadyReplayed were marked by another replay first.
	AlreadyReplayed int `json:"already_replayed"`
}

// Replay replays the letters f selects, or with ids those letters (f
// applies to them as well), oldest first. It stops at the first error
// (ctx done, the store unreachable) and returns it with the tally so far:
// what was committed before stays, and a replay run again skips it.
func (r Replayer) Replay(ctx context.Context, f Filter, ids []int64, dryRun bool) (Tally, error) {
	var t Tally
	var letters []Letter
	if len(ids) == 0 {
		var err error
		if letters, err = r.Store.Letters(ctx, f); err != nil {
			return t, err
		}
	}
	for _, id := range ids {
		f.ID = id
		l, err := r.Store.Letters(ctx, f)
		if err != nil {
			return t, err
		}
		letters = append(letters, l...)
	}
	t.Letters = len(letters)
	for i := range letters {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		l := &letters[i]
		out, err := r.one(ctx, l, dryRun)
		if err != nil {
			return t, err
		}
		switch {
		case out.AlreadyReplayed:
			t.AlreadyReplayed++
		case out.Reason != "":
			t.FailedAgain++
		case out.Dropped:
			t.Dropped++
		default:
			t.Replayed++
		}
		if r.Report != nil {
			r.Report(l, out)
		}
	}
	return t, nil
}

// one replays one letter. The store is handed a copy of it whose event is
// prepared: the letter keeps the event as received.
func (r Replayer) one(ctx context.Context, l *Letter, dryRun bool) (Outcome, error) {
	o := ReplayOptions{DryRun: dryRun, Revision: r.Revision}
	prepared := *l
	if r.Prepare != nil {
		refused, err := r.Prepare(ctx, &prepared.Event)
		if err != nil {
			return Outcome{}, fmt.Errorf("letter %d: %w", l.ID, err)
		}
		o.Refused = refused
	}
	if o.Refused == "" && r.Keep != nil {
		keep, err := r.Keep(&prepared.Event)
		if err != nil {
			o.Refused = err.Error()
		}
		o.Drop = err == nil && !keep
	}
	return r.Store.Replay(ctx, &prepared, o)
}

// ParseSince reads a Since filter as the commands and the operations API
// take it: an RFC 3339 time, or a duration before now.
func ParseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a positive duration", s)
	}
	return now.Add(-d), nil
}
