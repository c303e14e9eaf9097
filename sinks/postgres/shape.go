package postgres

import (
	"fmt"

	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// TableShape returns the sink's routes as package table declares them,
// compiled by the functions the running sink compiles them with: the
// mapping and delete rules of each route (compileMapping), and a
// templated table rendered and checked as the writer does it
// (renderTable, then the tableOwners check: a table another route
// writes, a route past its max_tables), and what no PostgreSQL column of
// the mapping's type can store (storable).
func (c *sinkConfig) TableShape() (table.Shape, error) {
	d := c.withDefaults()
	s := table.Shape{Routed: len(d.Routes) > 0, Format: d.Format, Delete: d.Delete}
	var owners *routing.Owners
	for i, rc := range d.routes() {
		r := table.Route{Name: routeName(rc), When: rc.When, Dest: rc.Table, DestIsTable: true, Columns: rc.Columns, Key: rc.Key, Explode: rc.Explode}
		var err error
		if r.Mapper, r.Rules, err = d.compileMapping(rc); err != nil {
			return table.Shape{}, fmt.Errorf("routes[%d]: %w", i, err)
		}
		r.Check = newStorable(r.Mapper.Columns()).check
		tmpl, err := expr.CompileTemplate(rc.Table)
		if err != nil {
			return table.Shape{}, fmt.Errorf("routes[%d].table: %w", i, err)
		}
		if !tmpl.Literal() {
			if owners == nil {
				owners = newTableOwners(&d)
			}
			r.Render = func(ev *sinks.Event) (string, error) {
				table, _, err := renderTable(r.Name, tmpl, ev)
				if err == nil {
					if err = owners.Check(i, table); err == nil {
						owners.Add(i, table)
					}
				}
				return table, err
			}
		}
		s.Routes = append(s.Routes, r)
	}
	return s, nil
}

// renderTable renders the table a templated route names for ev and checks
// it is an identifier (see checkTableName); the error is the event's
// dead-letter reason.
func renderTable(route string, tmpl *expr.Template, ev *sinks.Event) (string, []string, error) {
	b, err := tmpl.Append(nil, ev)
	if err != nil {
		return "", nil, fmt.Errorf("route %s: table: %w", route, err)
	}
	name := string(b)
	parts, err := checkTableName(name)
	if err != nil {
		return "", nil, fmt.Errorf("route %s: table %q: %w", route, name, err)
	}
	return name, parts, nil
}
