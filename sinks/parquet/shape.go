package parquet

import (
	"fmt"
	"strings"

	"github.com/ehsink/ehsink/internal/parquetfile"
	"github.com/ehsink/ehsink/sinks"
	tableshape "github.com/ehsink/ehsink/sinks/table"
)

// TableShape returns the sink's routes as package table declares them
// (imported as tableshape: the package's tests have a table helper):
// the running sink and `ehsink test` render and check the event's values
// of a route's path with the same function (renderPath), and map and
// convert rows with the same parquetfile.RowMapper.
func (c *sinkConfig) TableShape() (tableshape.Shape, error) {
	d := *c
	d.withDefaults()
	s := tableshape.Shape{Routed: len(d.Routes) > 0}
	for i, rc := range d.routes() {
		r := tableshape.Route{Name: rc.Name, When: rc.When, Dest: rc.Path, Columns: rc.Columns, Explode: d.Explode}
		if r.Name == "" {
			r.Name = rc.Path
		}
		tmpl, err := parseRouteTemplate(rc.Path)
		if err != nil {
			return tableshape.Shape{}, fmt.Errorf("routes[%d].path: %w", i, err)
		}
		rm, err := parquetfile.NewRowMapper(rc.Columns, d.Explode)
		if err != nil {
			return tableshape.Shape{}, fmt.Errorf("routes[%d].columns: %w", i, err)
		}
		r.Mapper, r.Check = rm.Mapper(), rm.Check
		if tmpl.values > 0 {
			name := r.Name
			r.Render = func(ev *sinks.Event) (string, error) {
				values, err := renderPath(name, tmpl, ev)
				return strings.Join(values, ", "), err
			}
		}
		s.Routes = append(s.Routes, r)
	}
	return s, nil
}

// renderPath returns the values of ev for the value placeholders of a
// route's path, each checked (see checkPathValue); the error is the
// event's dead-letter reason.
func renderPath(route string, tmpl *template, ev *sinks.Event) ([]string, error) {
	values, err := tmpl.renderValues(ev)
	if err != nil {
		return nil, fmt.Errorf("route %s: path: %w", route, err)
	}
	return values, nil
}
