package conntest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
)

// expectation is an [Expect] checked against its connector.
type expectation struct {
	filtered   bool
	op         cdc.Op        // what a row expectation wants: a row, a delete or a skip
	exploded   bool          // rows or elements of an exploded event
	elems      []expectation // one per element
	deadLetter *string
	row        []wantColumn
	// routeRow is row per route of a routed connector: the route an event
	// takes is known only when it runs.
	routeRow  map[string][]wantColumn
	route     *string
	table     *string
	fields    []wantField // a json record's fields
	rawRecord *string     // a raw record's line
}

type wantColumn struct {
	index int
	name  string
	want  value
}

type wantField struct {
	name string
	want value
}

func prepareExpect(t target, e *Expect) (expectation, error) {
	set := 0
	exploded := e.Rows != nil || e.Elements != nil // route: may name the exploding route
	for _, isSet := range []bool{e.Row != nil || e.Route != nil && e.Delete == nil && !exploded || e.Table != nil && e.Delete == nil, e.Delete != nil, e.Record != nil, e.DeadLetter != nil, e.Filtered, e.Skipped, e.Rows != nil || e.Elements != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		return expectation{}, errors.New("want exactly one of row or delete (with route or table, or either alone), rows or elements (with explode), record, dead_letter, filtered: true and skipped: true")
	}
	if e.Filtered {
		return expectation{filtered: true}, nil
	}
	if x, err, ok := prepareExploded(t, e); ok {
		return x, err
	}
	var x expectation
	var errs []error
	row, field := e.Row, "row"
	switch {
	case e.Skipped:
		x.op = cdc.OpSkip
	case e.Delete != nil:
		row, field, x.op = e.Delete, "delete", cdc.OpDelete
		if !deletes(t) {
			return x, &config.Error{Path: "delete", Err: errors.New("this connector deletes nothing (its sink has no format: debezium or delete block)")}
		}
		if len(e.Delete) == 0 {
			return x, &config.Error{Path: "delete", Err: errors.New("name the key's columns and values")}
		}
	}
	if _, isStdout := t.(*stdoutTarget); isStdout && x.op != cdc.OpUpsert {
		return x, &config.Error{Path: field, Err: errors.New("the stdout sink writes records, not rows: use record")}
	}
	if _, routed := t.(*routedTarget); !routed && (e.Route != nil || e.Table != nil) {
		field := "route"
		if e.Route == nil {
			field = "table"
		}
		return x, &config.Error{Path: field, Err: errors.New("this connector's sink has no routes")}
	}
	switch t := t.(type) {
	case *mapTarget:
		if e.Record != nil {
			return x, &config.Error{Path: "record", Err: errors.New("this connector's sink has columns: use row")}
		}
		x.row, errs = wantRow(t.mapper.Columns(), row, field, t.key, "the connector")
	case *routedTarget:
		if err := x.prepareRouted(t, e, row, field, &errs); err != nil {
			return x, err
		}
	case *stdoutTarget:
		if err := x.prepareRecord(t, e, &errs); err != nil {
			return x, err
		}
	}
	x.deadLetter = e.DeadLetter
	return x, errors.Join(errs...)
}

// prepareRouted prepares the route, table and row of a routed connector's
// expectation; problems of the row's columns go to errs.
func (x *expectation) prepareRouted(t *routedTarget, e *Expect, row map[string]any, field string, errs *[]error) error {
	if e.Record != nil {
		return &config.Error{Path: "record", Err: errors.New("this connector's sink has columns: use row")}
	}
	x.route, x.table = e.Route, e.Table
	if e.Route != nil && t.route(*e.Route) == nil {
		return &config.Error{Path: "route", Err: fmt.Errorf("no route named %q (routes: %s)", *e.Route, strings.Join(t.names(), ", "))}
	}
	if e.Table != nil && !slices.ContainsFunc(t.routes, func(r routeSpec) bool { return r.DestIsTable }) {
		return &config.Error{Path: "table", Err: errors.New("this connector's routes have paths, not tables: use route")}
	}
	if row == nil {
		return nil
	}
	// The columns are checked against the named route, or against
	// every route that has them all when the route is left open.
	x.routeRow = map[string][]wantColumn{}
	var lastErrs []error
	for _, r := range t.routes {
		if e.Route != nil && r.Name != *e.Route {
			continue
		}
		want, rerrs := wantRow(r.target.mapper.Columns(), row, field, r.target.key, "route "+r.Name)
		if len(rerrs) == 0 {
			x.routeRow[r.Name] = want
		}
		lastErrs = rerrs
	}
	if len(x.routeRow) == 0 {
		*errs = lastErrs
	}
	return nil
}

// prepareRecord prepares a stdout record expectation: the whole line
// (format raw) or envelope fields (format json).
func (x *expectation) prepareRecord(t *stdoutTarget, e *Expect, errs *[]error) error {
	if e.Row != nil {
		return &config.Error{Path: "row", Err: errors.New("the stdout sink writes records, not rows: use record")}
	}
	if e.Record == nil {
		return nil
	}
	if t.raw {
		s, ok := e.Record.(string)
		if !ok {
			return &config.Error{Path: "record", Err: errors.New("want the line as a string (format: raw)")}
		}
		x.rawRecord = &s
		return nil
	}
	fields, ok := e.Record.(map[string]any)
	if !ok {
		return &config.Error{Path: "record", Err: errors.New("want a map of envelope fields (format: json), such as {partition: \"0\", body: {...}}")}
	}
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		v := fields[name]
		raw, err := json.Marshal(v)
		if err != nil {
			*errs = append(*errs, &config.Error{Path: "record." + name, Err: err})
			continue
		}
		x.fields = append(x.fields, wantField{name: name, want: jsonValue(raw)})
	}
	return nil
}

// prepareExploded prepares the expectation of a connector whose mapping
// explodes an array, or of rows/elements given to one that does not; ok
// is false when neither applies.
func prepareExploded(t target, e *Expect) (x expectation, err error, ok bool) {
	mt, _ := t.(*mapTarget)
	if rt, ok := t.(*routedTarget); ok && (e.Rows != nil || e.Elements != nil) {
		mt = rt.explodingRoute(e.Route)
	}
	explode := mapping.Path{}
	if mt != nil {
		explode = mt.mapper.Explode()
	}
	if !explode.IsSet() {
		if e.Rows != nil || e.Elements != nil {
			field := "rows"
			if e.Rows == nil {
				field = "elements"
			}
			return x, &config.Error{Path: field, Err: errors.New("this connector's mapping has no explode: use row")}, true
		}
		return x, nil, false
	}
	if e.Row != nil || e.Record != nil {
		return x, &config.Error{Path: "row", Err: fmt.Errorf("this connector explodes %s: use rows (one per element) or elements", explode)}, true
	}
	if e.DeadLetter != nil {
		return expectation{deadLetter: e.DeadLetter}, nil, true
	}
	x.exploded = true
	x.route = e.Route
	x.elems = []expectation{}
	var errs []error
	for i, r := range e.Rows {
		row, rerrs := wantRow(mt.mapper.Columns(), r, "row", nil, "the connector")
		for _, p := range config.Errors(errors.Join(rerrs...)) {
			errs = append(errs, &config.Error{Path: config.JoinPath(fmt.Sprintf("rows[%d]", i), strings.TrimPrefix(p.Path, "row.")), Err: p.Err})
		}
		x.elems = append(x.elems, expectation{row: row})
	}
	for i := range e.Elements {
		el := &e.Elements[i]
		path := fmt.Sprintf("elements[%d]", i)
		if (el.Row == nil) == (el.DeadLetter == nil) || el.Record != nil || el.Filtered || el.Rows != nil || el.Elements != nil || el.Route != nil || el.Table != nil {
			errs = append(errs, &config.Error{Path: path, Err: errors.New("want exactly one of row and dead_letter")})
			continue
		}
		ex := expectation{deadLetter: el.DeadLetter}
		if el.Row != nil {
			var rerrs []error
			ex.row, rerrs = wantRow(mt.mapper.Columns(), el.Row, "row", nil, "the connector")
			for _, p := range config.Errors(errors.Join(rerrs...)) {
				errs = append(errs, &config.Error{Path: config.JoinPath(path, p.Path), Err: p.Err})
			}
		}
		x.elems = append(x.elems, ex)
	}
	return x, errors.Join(errs...), true
}

// deletes reports whether some events of t may be deletes.
func deletes(t target) bool {
	switch t := t.(type) {
	case *mapTarget:
		return t.rules != nil
	case *routedTarget:
		return slices.ContainsFunc(t.routes, func(r routeSpec) bool { return r.target.rules != nil })
	}
	return false
}

// wantRow checks the expected row (field "row") or deleted key (field
// "delete", key columns only) of a mapping with columns cols; of names the
// mapping's owner in messages.
func wantRow(cols mapping.Columns, row map[string]any, field string, key []string, of string) ([]wantColumn, []error) {
	var errs []error
	var out []wantColumn
	names := cols.Names()
	for _, name := range slices.Sorted(maps.Keys(row)) {
		i := cols.Index(name)
		if i < 0 {
			hint := ""
			if near := config.Suggest(name, names); near != "" {
				hint = "did you mean " + near + "? "
			}
			errs = append(errs, &config.Error{Path: field + "." + name, Err: fmt.Errorf("not a column of %s (%scolumns: %s)", of, hint, strings.Join(names, ", "))})
			continue
		}
		if field == "delete" && !slices.Contains(key, name) {
			errs = append(errs, &config.Error{Path: field + "." + name, Err: fmt.Errorf("not a key column of %s: a delete names its key (%s)", of, strings.Join(key, ", "))})
			continue
		}
		want, err := wantValue(cols[i], row[name])
		if err != nil {
			errs = append(errs, &config.Error{Path: field + "." + name, Err: err})
			continue
		}
		out = append(out, wantColumn{index: i, name: name, want: want})
	}
	slices.SortFunc(out, func(a, b wantColumn) int { return a.index - b.index })
	return out, errs
}

// check compares got with x and returns the difference, one indented line
// per problem, or "" when got meets x.
func (x *expectation) check(got outcome) string {
	const indent = "      "
	if x.filtered {
		if !got.filtered {
			return fmt.Sprintf("%swant the event dropped by the filter, got %s\n", indent, x.describe(got))
		}
		return ""
	}
	if got.filtered {
		what := "a row"
		switch {
		case x.deadLetter != nil:
			what = "a dead letter"
		case x.row == nil:
			what = "a record"
		}
		return fmt.Sprintf("%swant %s, got the event dropped by the connector's filter\n", indent, what)
	}
	if x.exploded {
		return x.checkElements(got)
	}
	if x.deadLetter != nil {
		switch {
		case got.reason == "":
			return fmt.Sprintf("%swant a dead letter containing %q, got %s\n", indent, *x.deadLetter, x.describe(got))
		case got.stops:
			return fmt.Sprintf("%swant a dead letter containing %q, got %s\n", indent, *x.deadLetter, x.describe(got))
		case !strings.Contains(got.reason, *x.deadLetter):
			return fmt.Sprintf("%swant a dead letter containing %q, got one with the reason %q\n", indent, *x.deadLetter, strings.ReplaceAll(got.reason, "\n", "; "))
		}
		return ""
	}
	if got.reason != "" || got.op != x.op {
		what := "a row"
		switch {
		case x.op == cdc.OpDelete:
			what = "a delete"
		case x.op == cdc.OpSkip:
			what = "nothing written (skipped)"
		case x.row == nil && x.routeRow == nil && x.route == nil && x.table == nil:
			what = "a record"
		}
		return fmt.Sprintf("%swant %s, got %s\n", indent, what, x.describe(got))
	}
	if got.exploded {
		return fmt.Sprintf("%swant a row, got %s (the mapping explodes: use rows)\n", indent, x.describe(got))
	}
	return x.checkWritten(got)
}

// checkWritten compares what a row or record expectation names (route,
// table, columns, record) with what the connector wrote.
func (x *expectation) checkWritten(got outcome) string {
	const indent = "      "
	var b strings.Builder
	if x.route != nil && got.route != *x.route {
		fmt.Fprintf(&b, "%sroute: want %s, got %s\n", indent, *x.route, got.route)
	}
	if x.table != nil && got.table != *x.table {
		fmt.Fprintf(&b, "%stable: want %s, got %s\n", indent, *x.table, got.table)
	}
	row := x.row
	if x.routeRow != nil {
		var ok bool
		if row, ok = x.routeRow[got.route]; !ok && b.Len() == 0 {
			fmt.Fprintf(&b, "%srow: the event took route %s, whose columns are not those expected (%s)\n", indent, got.route, x.describe(got))
		}
	}
	for _, c := range row {
		if g := got.row[c.index]; g.key != c.want.key {
			fmt.Fprintf(&b, "%scolumn %s: want %s, got %s\n", indent, c.name, c.want.show, g.show)
		}
	}
	if x.rawRecord != nil && string(got.record) != *x.rawRecord {
		fmt.Fprintf(&b, "%srecord: want %q, got %q\n", indent, *x.rawRecord, got.record)
	}
	if len(x.fields) > 0 {
		var env map[string]json.RawMessage
		if err := json.Unmarshal(got.record, &env); err != nil {
			return fmt.Sprintf("%swant a JSON record, got %q\n", indent, got.record)
		}
		for _, f := range x.fields {
			show := "absent"
			if raw, ok := env[f.name]; ok {
				g := jsonValue(raw)
				if g.key == f.want.key {
					continue
				}
				show = g.show
			}
			fmt.Fprintf(&b, "%srecord field %s: want %s, got %s\n", indent, f.name, f.want.show, show)
		}
	}
	return b.String()
}

// checkElements compares the elements of an exploded event with x's.
func (x *expectation) checkElements(got outcome) string {
	const indent = "      "
	if !got.exploded {
		return fmt.Sprintf("%swant %d rows, got %s\n", indent, len(x.elems), x.describe(got))
	}
	if x.route != nil && got.route != *x.route {
		return fmt.Sprintf("%sroute: want %s, got %s\n", indent, *x.route, got.route)
	}
	if len(got.elems) != len(x.elems) {
		var b strings.Builder
		fmt.Fprintf(&b, "%swant %d rows, got %d element%s:\n", indent, len(x.elems), len(got.elems), plural(len(got.elems)))
		for i, g := range got.elems {
			fmt.Fprintf(&b, "%s  element %d: %s\n", indent, i, x.describe(g))
		}
		return b.String()
	}
	var b strings.Builder
	for i := range x.elems {
		if msg := x.elems[i].check(got.elems[i]); msg != "" {
			fmt.Fprintf(&b, "%selement %d:\n", indent, i)
			for _, line := range strings.SplitAfter(strings.TrimSuffix(msg, "\n"), "\n") {
				b.WriteString("  " + strings.TrimSuffix(line, "\n") + "\n")
			}
		}
	}
	return b.String()
}

// describe says in a phrase what the connector made of an event. The
// reasons of several failing columns, one per line, are put on one.
func (x *expectation) describe(got outcome) string {
	reason := strings.ReplaceAll(got.reason, "\n", "; ")
	switch {
	case got.filtered:
		return "the event dropped by the connector's filter"
	case got.exploded:
		return fmt.Sprintf("%d element%s", len(got.elems), plural(len(got.elems)))
	case got.stops:
		return "a failure that stops the connector (errors.tolerance: none): " + reason
	case got.reason != "":
		return "a dead letter: " + reason
	case got.op == cdc.OpSkip:
		return "nothing written (skipped)"
	case got.op == cdc.OpDelete:
		var parts []string
		for i, v := range got.row {
			if v.show != "null" {
				parts = append(parts, got.cols[i]+"="+v.show)
			}
		}
		return "a delete of " + strings.Join(parts, " ")
	case got.row != nil:
		parts := make([]string, len(got.row))
		for i, v := range got.row {
			parts[i] = got.cols[i] + "=" + v.show
		}
		where := ""
		if got.route != "" {
			where = " of route " + got.route
		}
		if got.table != "" {
			where += " in table " + got.table
		}
		return "a row" + where + ": " + strings.Join(parts, " ")
	}
	return "the record " + strconv.Quote(string(got.record))
}

// parseTime parses an RFC 3339 time into UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("not an RFC 3339 time such as 2026-03-01T10:00:00Z")
	}
	return t.UTC(), nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
