package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// Routing.
//
// With routes, every event goes to the table of the first route whose
// condition holds. All the tables of a connector are written by one
// transaction per flush, together with the dead letters and the one
// watermark row of the (connector, partition), whose table_name is "*":
// its row lock fences every table at once, and a replay finds every
// table's rows of a range committed or none.
//
// A templated table (`events_{$.type}`) is looked up when an event first
// names it: created with create_table, or checked like a configured table.
// An event that names a table that is not there (or has other columns),
// an invalid name, more tables than max_tables, or that no route takes, is
// an error of that event: a dead letter with the reason.

// eventError is the failure of one event to find its table.
type eventError struct{ err error }

func (e *eventError) Error() string { return e.err.Error() }
func (e *eventError) Unwrap() error { return e.err }

// destOf returns the table ev goes to. An error of the event itself is an
// *eventError; any other error (the database unreachable while a new
// table is looked up) fails the batch.
func (s *sink) destOf(ctx context.Context, ev *sinks.Event) (*dest, error) {
	r := s.routes[0]
	if s.sel != nil {
		i, err := s.sel.Select(ev)
		if err != nil {
			return nil, &eventError{err}
		}
		r = s.routes[i]
	}
	if r.static != nil {
		return r.static, nil
	}
	name, parts, err := renderTable(r.name, r.tmpl, ev)
	if err != nil {
		return nil, &eventError{err}
	}
	return s.templated(ctx, r, name, parts)
}

// templated returns the dest of a table a templated route rendered,
// checking (or creating) the table the first time.
func (s *sink) templated(ctx context.Context, r *route, name string, parts []string) (*dest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.owners.Check(r.index, name); err != nil {
		return nil, &eventError{err}
	}
	d := s.dests[name]
	if d != nil && (d.err == nil || time.Since(d.failedAt) < routing.RetryUnwritableAfter) {
		if d.err != nil {
			return nil, &eventError{d.err}
		}
		return d, nil
	}
	if d == nil {
		d = s.newDest(r, name, parts)
	}
	err := s.prepareTemplated(ctx, d)
	if err != nil && sinks.IsTransient(err) {
		return nil, fmt.Errorf("postgres: connector %q route %s table %s: %w", s.info.Connector, r.name, name, err)
	}
	if _, seen := s.dests[name]; !seen {
		s.dests[name] = d
		s.owners.Add(r.index, name)
	}
	if err != nil {
		d.err, d.failedAt = fmt.Errorf("route %s: table %s: %w", r.name, name, err), time.Now()
		s.log.Warn("a table named by events cannot be written; its events are dead letters", "route", r.name, "table", name, "err", err)
		return nil, &eventError{d.err}
	}
	d.err = nil
	return d, nil
}

// newTableOwners returns which route writes each table of c (see
// routing.Owners).
func newTableOwners(c *sinkConfig) *routing.Owners {
	routes := c.routes()
	names, max, literal := make([]string, len(routes)), make([]int, len(routes)), make([]string, len(routes))
	for i, rc := range routes {
		names[i], max[i] = routeName(rc), cmp.Or(rc.MaxTables, defaultMaxTables)
		if tmpl, err := expr.CompileTemplate(rc.Table); err == nil && tmpl.Literal() {
			literal[i] = rc.Table
		}
	}
	return routing.NewOwners(names, max, literal)
}

// prepareTemplated checks (or creates) d's table on a pool connection.
func (s *sink) prepareTemplated(ctx context.Context, d *dest) error {
	conn, release, err := s.acquire(ctx)
	if err != nil {
		return classify(err)
	}
	failed := true
	defer func() { release(failed) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return classify(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := lockSchema(ctx, tx); err != nil {
		return err
	}
	if err := s.prepareDest(ctx, tx, d); err != nil {
		if errors.Is(err, errNoTable) {
			return errors.New("does not exist (create it, or set create_table: true)")
		}
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return classify(err)
	}
	failed = false
	return nil
}
