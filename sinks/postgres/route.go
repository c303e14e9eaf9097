package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ehsink/ehsink/internal/table/expr"
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
	if err := s.owners.check(r.index, name); err != nil {
		return nil, &eventError{err}
	}
	d := s.dests[name]
	if d != nil && (d.err == nil || time.Since(d.failedAt) < retryDestAfter) {
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
		s.owners.add(r.index, name)
	}
	if err != nil {
		d.err, d.failedAt = fmt.Errorf("route %s: table %s: %w", r.name, name, err), time.Now()
		s.log.Warn("a table named by events cannot be written; its events are dead letters", "route", r.name, "table", name, "err", err)
		return nil, &eventError{d.err}
	}
	d.err = nil
	return d, nil
}

// tableOwners says which route writes each table of a connector: a
// route's literal table from the start, a templated route's tables as
// events name them, at most max_tables of them per route. One table has
// one column mapping, so a table a second route names is an error of the
// event. The running sink (templated) and `ehsink test` (the Render of
// TableShape) ask the same questions of it. It is not safe for concurrent
// use (the sink holds its mu).
type tableOwners struct {
	names []string       // route names, by index
	max   []int          // max_tables, by route index
	owner map[string]int // table → the index of the route that writes it
	count []int          // tables each route has named so far
}

func newTableOwners(c *sinkConfig) *tableOwners {
	routes := c.routes()
	o := &tableOwners{owner: map[string]int{}, count: make([]int, len(routes))}
	for i, rc := range routes {
		o.names = append(o.names, routeName(rc))
		o.max = append(o.max, cmp.Or(rc.MaxTables, defaultMaxTables))
		if tmpl, err := expr.CompileTemplate(rc.Table); err == nil && tmpl.Literal() {
			if _, dup := o.owner[rc.Table]; !dup {
				o.owner[rc.Table] = i
			}
		}
	}
	return o
}

// check returns why route i may not write table name, an error of the
// event that named it; nil when it may.
func (o *tableOwners) check(i int, name string) error {
	if j, ok := o.owner[name]; ok {
		if j != i {
			return fmt.Errorf("route %s: table %s is written by route %s (one table, one column mapping)", o.names[i], name, o.names[j])
		}
		return nil
	}
	if o.count[i] >= o.max[i] {
		return fmt.Errorf("route %s: table %s would be table %d of the route, past max_tables %d", o.names[i], name, o.count[i]+1, o.max[i])
	}
	return nil
}

// add records that route i writes table name, which check allowed.
func (o *tableOwners) add(i int, name string) {
	if _, ok := o.owner[name]; !ok {
		o.owner[name] = i
		o.count[i]++
	}
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
