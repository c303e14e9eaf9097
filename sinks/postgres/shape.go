package postgres

import (
	"fmt"

	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// TableShape returns the sink's routes as package table declares them:
// the running sink and `ehsink test` render and check a templated table
// with the same function (renderTable).
func (c *sinkConfig) TableShape() (table.Shape, error) {
	d := c.withDefaults()
	s := table.Shape{Routed: len(d.Routes) > 0, Format: d.Format, Delete: d.Delete}
	for i, rc := range d.routes() {
		r := table.Route{Name: rc.Name, When: rc.When, Dest: rc.Table, DestIsTable: true, Columns: rc.Columns, Key: rc.Key, Explode: rc.Explode}
		if r.Name == "" {
			r.Name = rc.Table
		}
		tmpl, err := expr.CompileTemplate(rc.Table)
		if err != nil {
			return table.Shape{}, fmt.Errorf("routes[%d].table: %w", i, err)
		}
		if !tmpl.Literal() {
			name := r.Name
			r.Render = func(ev *sinks.Event) (string, error) {
				table, _, err := renderTable(name, tmpl, ev)
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
