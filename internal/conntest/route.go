package conntest

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// routeSpec is one entry of a sink's `routes:` list, read by reflection
// (no sink package is linked for it): its name, condition, destination
// (`table`, or `path`) and column mapping.
type routeSpec struct {
	name, when, dest string
	isTable          bool // dest is a table (postgres), not a path
	cols             mapping.Columns
	explode          mapping.Path
	key              []string
	target           *mapTarget
}

// routesOf finds a sink config's `routes:` list: a slice of structs whose
// elements have a mapping.Columns field. It reports false when the config
// has none or the list is empty.
func routesOf(cfg any) ([]routeSpec, bool) {
	v, ok := structOf(cfg)
	if !ok {
		return nil, false
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || yamlName(f) != "routes" || f.Type.Kind() != reflect.Slice || f.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		list := v.Field(i)
		if list.Len() == 0 {
			return nil, false
		}
		var out []routeSpec
		for j := range list.Len() {
			r := routeSpec{}
			el := list.Index(j)
			for k := range el.NumField() {
				ef := el.Type().Field(k)
				if !ef.IsExported() || ef.Type.Kind() != reflect.String {
					continue
				}
				switch yamlName(ef) {
				case "name":
					r.name = el.Field(k).String()
				case "when":
					r.when = el.Field(k).String()
				case "table":
					r.dest, r.isTable = el.Field(k).String(), true
				case "path":
					r.dest = el.Field(k).String()
				}
			}
			if r.name == "" {
				r.name = r.dest
			}
			r.cols, _ = columnsOfStruct(el)
			r.explode = explodeOfStruct(el)
			r.key = keyOf(el)
			out = append(out, r)
		}
		return out, true
	}
	return nil, false
}

// routedTarget is a sink with routes: each event takes the first route
// whose condition holds and is mapped by that route's columns.
type routedTarget struct {
	routes []routeSpec
	tables []*expr.Template // the destinations as templates, for `table:`
	sel    *routing.Selector
	stops  bool
	// debezium: a tombstone is skipped before a route is chosen, as the
	// PostgreSQL writer does.
	debezium bool
}

func newRoutedTarget(routes []routeSpec, format cdc.Format, del *cdc.Delete, stops bool) (*routedTarget, error) {
	t := &routedTarget{routes: routes, stops: stops, debezium: format == cdc.FormatDebezium}
	var conds []routing.Cond
	var names []string
	for i := range routes {
		r := &routes[i]
		mt, err := newMapTargetWith(r.cols, mapping.Options{Explode: r.explode}, stops)
		if err == nil {
			err = mt.deleting(format, routeDelete(del, r.key), r.key)
		}
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		r.target = mt
		var cond routing.Cond
		if r.when != "" {
			if cond, err = routing.CompileCondition(r.when); err != nil {
				return nil, fmt.Errorf("routes[%d].when: %w", i, err)
			}
		}
		// A path template has placeholders of its own ({partition}): only
		// a table is rendered, for `table:` expectations.
		var tmpl *expr.Template
		if r.isTable {
			if tmpl, err = expr.CompileTemplate(r.dest); err != nil {
				return nil, fmt.Errorf("routes[%d].table: %w", i, err)
			}
		}
		t.tables = append(t.tables, tmpl)
		conds, names = append(conds, cond), append(names, r.name)
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
		if r.explode.IsSet() {
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
		if t.routes[i].name == name {
			return &t.routes[i]
		}
	}
	return nil
}

func (t *routedTarget) names() []string {
	out := make([]string, len(t.routes))
	for i, r := range t.routes {
		out[i] = r.name
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
	out := t.routes[i].target.apply(ctx, ev)
	out.route = t.routes[i].name
	if tm := t.tables[i]; tm != nil && out.reason == "" {
		b, err := tm.Append(nil, ev)
		if err != nil {
			return outcome{reason: fmt.Sprintf("route %s: table: %v", out.route, err), stops: t.stops}
		}
		out.table = string(b)
	}
	return out
}

// routeDelete is the delete block as a route sees it: the entries of
// delete.key that name its key columns.
func routeDelete(del *cdc.Delete, key []string) *cdc.Delete {
	if del == nil {
		return nil
	}
	d := *del
	d.Key = map[string]string{}
	for k, v := range del.Key {
		if slices.Contains(key, k) {
			d.Key[k] = v
		}
	}
	return &d
}
