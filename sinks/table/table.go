// Package table declares the shape of a table-writing sink: the column
// mapping, key and exploded array of each route, the route conditions, and
// how an event's destination (a table name, the values of a path) is
// rendered and checked. The sink that owns a shape builds it once, from
// its config, and `ehsink test` previews events through the very same
// shape, so that a test cannot pass where the running sink dead-letters.
//
// A sink opts in by giving its config a TableShape method ([Shaper]). The
// built-in postgres and parquet sinks do, and stdout when it has columns;
// a custom sink declares its columns with [Columns], maps events with
// [Compile] and [Mapper], and returns its shape the same way. Routes
// without columns mean the sink has no mapping to test.
package table

import (
	"errors"
	"fmt"

	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// Columns is a column mapping as a sink config declares it (its
// `columns:` block): column name → value path and type.
type Columns = mapping.Columns

// Path is a JSON path into an event body, as `explode:` takes it.
type Path = mapping.Path

// Shaper is implemented by sink configs whose writers turn events into
// rows. TableShape is called after the config was decoded and validated.
type Shaper interface {
	// TableShape returns how the sink maps events, or an error naming the
	// config field that prevents it.
	TableShape() (Shape, error)
}

// Shape is how a sink turns events into rows.
type Shape struct {
	// Routes are the sink's routes, tried in order: an event takes the
	// first whose When holds. A sink without a `routes:` list has one
	// route, with no condition.
	Routes []Route
	// Routed says the sink has a `routes:` list (Routes came from it).
	Routed bool
	// Format says how bodies are read: plain JSON, or Debezium change
	// events (whose deletes and tombstones write no row). Zero: plain.
	Format cdc.Format
	// Delete, if set, makes the events its condition matches deletes of
	// their key (the postgres sink's `delete:` block).
	Delete *cdc.Delete
}

// Route is one way events go.
type Route struct {
	// Name names the route in reports: its `name`, or its destination as
	// written.
	Name string
	// When is the route's condition; empty takes every event.
	When string
	// Dest is the destination as written (a table, or a path template).
	Dest string
	// DestIsTable says Dest is a table name (rendered in reports).
	DestIsTable bool
	// Columns maps event values to the route's columns.
	Columns Columns
	// Key lists the route's key columns (upserts); they are never null.
	Key []string
	// Explode, if set, makes one row per element of that array.
	Explode Path
	// Render returns where ev goes on this route, rendered and checked as
	// the sink does it while running; an error makes ev a dead letter
	// with that reason. Nil when the destination does not depend on the
	// event. A Render may keep state across calls, as the sink does
	// across events (the tables a templated route has named so far,
	// against its max_tables).
	Render func(ev *sinks.Event) (string, error)
	// Mapper, if set, is the sink's own compiled mapping of the route,
	// the one its writer maps events with; `ehsink test` then maps with
	// it. If nil, Columns are compiled (Key columns not nullable).
	Mapper *Mapper
	// Rules, if set, are the sink's own rules of the route (package cdc:
	// which events are deletes or skips, and how a delete finds its
	// key), the ones its writer applies; they map rows in Mapper's place.
	Rules *cdc.Rules
	// Check, if set, is the sink's own check of a mapped row (one value
	// per column, as Mapper.Map fills it) that needs no destination
	// (what no column of its type can store); its error makes the event,
	// or the exploded element, a dead letter.
	Check func(row []any) error
}

// Validate reports a literal table named by two routes: two column
// mappings would write one table. Every other check of a route belongs to
// the sink's own Validate, which calls this one.
func (s Shape) Validate() error {
	var errs []error
	seen := map[string]string{}
	for i, r := range s.Routes {
		if !r.DestIsTable || r.Render != nil || r.Dest == "" {
			continue
		}
		if other, dup := seen[r.Dest]; dup {
			errs = append(errs, fmt.Errorf("routes[%d]: table %s is also the table of route %s (one table, one column mapping)", i, r.Dest, other))
			continue
		}
		seen[r.Dest] = r.Name
	}
	return errors.Join(errs...)
}

// Mapper turns events into rows by a column mapping, as the built-in sinks
// do: Map fills one row, Rows the rows of an exploded event. A custom
// sink compiles its Columns once and maps each event with it.
type Mapper = mapping.Mapper

// Decimal is the value a decimal column maps to; String gives its exact
// text.
type Decimal = mapping.Decimal

// Compile checks a column mapping and compiles it for Mapper.Map.
func Compile(cols Columns) (*Mapper, error) { return mapping.Compile(cols) }
