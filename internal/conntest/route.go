package conntest

import (
	"context"
	"fmt"

	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// routeSpec is one route of a sink's shape, compiled.
type routeSpec struct {
	table.Route
	target *mapTarget
}

// routedTarget is a sink with routes: each event takes the first route
// whose condition holds and is mapped by that route's columns.
type routedTarget struct {
	routes []routeSpec
	sel    *routing.Selector
	stops  bool
	// debezium: a tombstone is skipped before a route is chosen, as the
	// PostgreSQL writer does.
	debezium bool
}

func newRoutedTarget(shape table.Shape, stops bool) (*routedTarget, error) {
	t := &routedTarget{stops: stops, debezium: shape.Format == cdc.FormatDebezium}
	var conds []routing.Cond
	var names []string
	for i, r := range shape.Routes {
		mt, err := newMapTarget(shape, r, stops)
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		var cond routing.Cond
		if r.When != "" {
			if cond, err = routing.CompileCondition(r.When); err != nil {
				return nil, fmt.Errorf("routes[%d].when: %w", i, err)
			}
		}
		t.routes = append(t.routes, routeSpec{Route: r, target: mt})
		conds, names = append(conds, cond), append(names, r.Name)
	}
	t.sel = routing.NewSelector(conds, names)
	return t, nil
}

// explodingRoute returns the mapping of the route named name, or when name
// is nil of the only route that explodes; nil when there is none.
func (t *routedTarget) explodingRoute(name *string) *mapTarget {
	if name != nil {
		if r := t.route(*name); r != nil {
			return r.target
		}
		return nil
	}
	var found *mapTarget
	for _, r := range t.routes {
		if r.Explode.IsSet() {
			if found != nil {
				return nil
			}
			found = r.target
		}
	}
	return found
}

// route returns the route named name, or nil.
func (t *routedTarget) route(name string) *routeSpec {
	for i := range t.routes {
		if t.routes[i].Name == name {
			return &t.routes[i]
		}
	}
	return nil
}

func (t *routedTarget) names() []string {
	out := make([]string, len(t.routes))
	for i, r := range t.routes {
		out[i] = r.Name
	}
	return out
}

func (t *routedTarget) apply(ctx context.Context, ev *sinks.Event) outcome {
	if t.debezium && cdc.IsTombstone(ev.Body) {
		return outcome{op: cdc.OpSkip}
	}
	i, err := t.sel.Select(ev)
	if err != nil {
		return outcome{reason: err.Error(), stops: t.stops}
	}
	r := &t.routes[i]
	out := r.target.apply(ctx, ev)
	out.route = r.Name
	if r.DestIsTable && out.reason == "" && r.Render == nil {
		out.table = r.Dest
	}
	if !r.DestIsTable {
		out.table = ""
	}
	return out
}
