package delta

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// A routed sink sends each event to the table of its route: one sink of
// this package per route's table, each with its own log, commits and txn
// of each partition, and one dead-letter table for them all.
//
// A flush commits the letters first, then every route's table in the
// routes' order, each with the partition's txn at the flush's last
// sequence number, rows or not: the tables' txns move together, so the
// lowest of them is what every table holds, and Open returns it. A
// process that dies between two tables' commits leaves the later tables
// behind; the replay from the lowest txn gives the tables already past
// it events their own txn covers, which their writers skip. The fixed
// order also fences a stale owner consistently: whoever commits the first
// table wins the flush, and the other is fenced there before it touches
// the next.

// routedSink is a delta sink with routes. It is safe for concurrent use;
// each of its writers is used by one goroutine at a time.
type routedSink struct {
	info   sinks.Info
	log    *slog.Logger
	sel    *routing.Selector
	names  []string // route names, by index
	tables []*sink  // by route index
	dl     *sink
	// letterStore reads and replays dl's letters.
	*letterStore
	closed atomic.Bool
}

// newRoutedSink opens the table of each route and the dead-letter table,
// as newDeltaSink does for one. ctx bounds these calls only; it starts no
// goroutines.
func newRoutedSink(ctx context.Context, cfg *sinkConfig, info sinks.Info) (*routedSink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("delta sink of connector %q: %w", info.Connector, err)
	}
	rs := &routedSink{info: info, log: info.Logger}
	if rs.log == nil {
		rs.log = slog.New(slog.DiscardHandler)
	}
	rs.log = rs.log.With("sink", "delta", "dest", cfg.String())
	var conds []routing.Cond
	for i, r := range cfg.Routes {
		rs.names = append(rs.names, routeName(r))
		var cond routing.Cond
		if r.When != "" {
			var err error
			if cond, err = routing.CompileCondition(r.When); err != nil {
				return nil, fmt.Errorf("delta sink of connector %q: routes[%d].when: %w", info.Connector, i, err)
			}
		}
		conds = append(conds, cond)
	}
	rs.sel = routing.NewSelector(conds, rs.names)
	fail := func(err error) (*routedSink, error) {
		_ = rs.Close(ctx)
		return nil, fmt.Errorf("delta sink of connector %q: %w", info.Connector, err)
	}
	for i, r := range cfg.Routes {
		rc := *cfg
		rc.Routes, rc.Table, rc.Columns, rc.Explode, rc.PartitionBy, rc.routed = nil, r.Table, r.Columns, r.Explode, r.PartitionBy, true
		t, err := newDeltaSink(ctx, &rc, info)
		if err != nil {
			return fail(fmt.Errorf("route %s: %w", rs.names[i], err))
		}
		rs.tables = append(rs.tables, t)
	}
	var err error
	if rs.dl, err = newDeadLetterSink(ctx, cfg, info); err != nil {
		return fail(err)
	}
	rs.letterStore = &letterStore{info: info, dl: rs.dl, tables: rs.tables, sel: rs.sel, names: rs.names}
	return rs, nil
}

// Close marks the sink and its tables' sinks closed. Writers must be
// closed first. Close is idempotent.
func (rs *routedSink) Close(ctx context.Context) error {
	rs.closed.Store(true)
	var errs []error
	for _, t := range rs.tables {
		errs = append(errs, t.Close(ctx))
	}
	if rs.dl != nil {
		errs = append(errs, rs.dl.Close(ctx))
	}
	return errors.Join(errs...)
}

// Open returns the partition's writer and its watermark: the lowest of
// the partition's txn versions in the route tables, what each of them
// holds. When some tables have the partition's txn and others not (a
// route added since, or a process that died before a table's first
// commit), it returns none: the partition resumes from its checkpoint,
// which the runner stores only after a flush committed every table, and
// each table skips what it holds. ctx bounds the call only.
func (rs *routedSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if rs.closed.Load() {
		return nil, nil, sinks.ErrClosed
	}
	rw := &routedWriter{rs: rs, partition: partition}
	fail := func(err error) (sinks.Writer, *sinks.Position, error) {
		_ = rw.Close(ctx)
		return nil, nil, err
	}
	var (
		low     *sinks.Position
		missing int
	)
	for _, t := range rs.tables {
		w, wm, err := t.Open(ctx, partition)
		if err != nil {
			return fail(err)
		}
		rw.parts = append(rw.parts, w.(*writer))
		switch {
		case wm == nil:
			missing++
		case low == nil || wm.SequenceNumber < low.SequenceNumber:
			low = wm
		}
	}
	dw, _, err := rs.dl.Open(ctx, partition)
	if err != nil {
		return fail(err)
	}
	rw.dl = dw.(*writer)
	if missing > 0 && low != nil {
		rs.log.Info("some route tables hold no txn of the partition; it resumes from its checkpoint",
			"partition", partition, "tables_without", missing, "lowest_txn", low.SequenceNumber)
		low = nil
	}
	return rw, low, nil
}

// routedWriter writes one partition into every route's table: parts[i]
// is the partition's writer of route i's table. It is used by one
// goroutine at a time, as sinks.Writer says.
type routedWriter struct {
	rs        *routedSink
	partition string
	parts     []*writer
	dl        *writer
	closed    bool
	// scratch, reused across Writes
	batches [][]sinks.Event
	index   [][]int // the batch index of each event of batches
}

var (
	_ sinks.Writer       = (*routedWriter)(nil)
	_ sinks.Batcher      = (*routedWriter)(nil)
	_ sinks.DeadLetterer = (*routedWriter)(nil)
)

// Write gives each event to the writer of its route's table. An event no
// route takes (an error wrapping routing.ErrNoRoute) or whose condition
// fails on it is reported in a *sinks.BatchError, as is one its table
// cannot map; the runner dead-letters them. Every table's open commit
// then takes the batch's last event, so that each flush moves every
// table's txn.
func (rw *routedWriter) Write(ctx context.Context, events []sinks.Event) error {
	if rw.closed {
		return sinks.ErrClosed
	}
	if len(events) == 0 {
		return nil
	}
	if len(rw.batches) != len(rw.parts) {
		rw.batches, rw.index = make([][]sinks.Event, len(rw.parts)), make([][]int, len(rw.parts))
	}
	for i := range rw.batches {
		clear(rw.batches[i])
		rw.batches[i], rw.index[i] = rw.batches[i][:0], rw.index[i][:0]
	}
	var failed []sinks.EventError
	for i := range events {
		r, err := rw.rs.sel.Select(&events[i])
		if err != nil {
			failed = append(failed, sinks.EventError{Index: i, Err: err})
			continue
		}
		rw.batches[r] = append(rw.batches[r], events[i])
		rw.index[r] = append(rw.index[r], i)
	}
	for r, batch := range rw.batches {
		if len(batch) == 0 {
			continue
		}
		err := rw.parts[r].Write(ctx, batch)
		var be *sinks.BatchError
		switch {
		case errors.As(err, &be):
			for _, f := range be.Failed {
				failed = append(failed, sinks.EventError{Index: rw.index[r][f.Index], Err: fmt.Errorf("route %s: %w", rw.rs.names[r], f.Err)})
			}
		case err != nil:
			return fmt.Errorf("route %s: %w", rw.rs.names[r], err)
		}
	}
	last := &events[len(events)-1]
	for _, p := range rw.parts {
		p.take(last)
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// DeadLetter adds letters to what the next Flush commits in the
// dead-letter table, and has every route table's open commit take their
// events, as the writer of one table does.
func (rw *routedWriter) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if rw.closed {
		return sinks.ErrClosed
	}
	if err := writeLetters(ctx, rw.dl, letters); err != nil {
		return fmt.Errorf("connector %q partition %s: %w", rw.rs.info.Connector, rw.partition, err)
	}
	for i := range letters {
		for _, p := range rw.parts {
			p.take(&letters[i].Event)
		}
	}
	return nil
}

// FlushDue reports whether the open commit of any table is due.
func (rw *routedWriter) FlushDue(now time.Time) bool {
	for _, p := range rw.parts {
		if p.FlushDue(now) {
			return true
		}
	}
	return false
}

// Flush commits the letters, then each table in the routes' order, and
// returns the lowest of the tables' watermarks, or none while a table
// holds no txn of the partition (as Open: a checkpoint of the others'
// would skip what that table lacks). A failure leaves the
// tables not yet committed open, and calling Flush again commits them; a
// table that finds another owner committed the partition fences the
// writer (sinks.ErrFenced), and the tables after it drop their files.
func (rw *routedWriter) Flush(ctx context.Context) (*sinks.Position, error) {
	if rw.closed {
		return nil, sinks.ErrClosed
	}
	fenced := func(err error) (*sinks.Position, error) {
		rw.discard(ctx)
		return nil, err
	}
	if rw.dl.open {
		// The letters first: a failure after them replays the flush,
		// whose letters their table's txn then covers.
		if _, err := rw.dl.Flush(ctx); err != nil {
			err = fmt.Errorf("connector %q partition %s: dead letters: %w", rw.rs.info.Connector, rw.partition, err)
			if errors.Is(err, sinks.ErrFenced) {
				return fenced(err)
			}
			return nil, err
		}
	}
	var low *sinks.Position
	missing := false
	for r, p := range rw.parts {
		pos, err := p.Flush(ctx)
		if err != nil {
			err = fmt.Errorf("route %s: %w", rw.rs.names[r], err)
			if errors.Is(err, sinks.ErrFenced) {
				return fenced(err)
			}
			return nil, err
		}
		switch {
		case pos == nil:
			missing = true
		case low == nil || pos.SequenceNumber < low.SequenceNumber:
			low = pos
		}
	}
	if missing {
		return nil, nil
	}
	return low, nil
}

// discard drops what every table's writer holds, after a fence.
func (rw *routedWriter) discard(ctx context.Context) {
	rw.dl.discard(ctx)
	for _, p := range rw.parts {
		p.discard(ctx)
	}
}

// Close closes the writers of every table. Close is idempotent.
func (rw *routedWriter) Close(ctx context.Context) error {
	if rw.closed {
		return nil
	}
	rw.closed = true
	var errs []error
	for _, p := range rw.parts {
		errs = append(errs, p.Close(ctx))
	}
	if rw.dl != nil {
		errs = append(errs, rw.dl.Close(ctx))
	}
	return errors.Join(errs...)
}
