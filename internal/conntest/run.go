package conntest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// Result counts the cases of a run.
type Result struct {
	// Cases is the number of cases run.
	Cases int
	// Failed is the number of cases with at least one event that did not
	// meet its expectation.
	Failed int
}

// RunFiles loads the configuration at configPath with opts and runs the
// cases of the test file at testPath against it, as `ehsink test` does,
// writing the report to w. It lets a `go test` run a config's cases, with
// the sinks its package registers (a custom sink's, say).
func RunFiles(ctx context.Context, configPath string, opts connector.LoadOptions, testPath string, w io.Writer) (Result, error) {
	cfg, err := connector.Load(configPath, opts)
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", configPath, err)
	}
	f, err := ReadFile(testPath)
	if err != nil {
		return Result{}, err
	}
	return Run(ctx, cfg, testPath, f, w)
}

// Run runs every case of f against the connectors of cfg, in order, and
// writes a PASS line per passing case and a FAIL block with the difference
// per failing one to w; testPath names the file in the report. A file that
// does not fit the connectors (an unknown connector or column, a row
// expected of the stdout sink, an expected value its column cannot hold) is
// a [*MalformedError] and nothing is run.
func Run(ctx context.Context, cfg *connector.Config, testPath string, f *File, w io.Writer) (Result, error) {
	cases, auto, err := prepare(cfg, testPath, f)
	if err != nil {
		return Result{}, err
	}
	for _, spec := range auto {
		// What columns: auto derived is what the cases are checked against.
		fmt.Fprintf(w, "connector %s: columns: auto derives\n", spec.Name)
		for _, line := range connector.DerivedColumns(spec) {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	res := Result{Cases: len(cases)}
	for _, c := range cases {
		var diff strings.Builder
		for i := range c.events {
			got := c.apply(ctx, &c.events[i])
			if msg := c.expect[i].check(got); msg != "" {
				fmt.Fprintf(&diff, "    event %d (partition %s, sequence number %d):\n%s",
					i+1, c.events[i].Partition, c.events[i].SequenceNumber, msg)
			}
		}
		name := fmt.Sprintf("%s: %q (connector %s)", testPath, c.name, c.connector)
		if diff.Len() == 0 {
			fmt.Fprintf(w, "PASS %s\n", name)
			continue
		}
		res.Failed++
		fmt.Fprintf(w, "FAIL %s\n%s", name, diff.String())
	}
	if res.Failed > 0 {
		fmt.Fprintf(w, "FAIL %s: %d of %d cases failed\n", testPath, res.Failed, res.Cases)
	} else {
		cases := "cases"
		if res.Cases == 1 {
			cases = "case"
		}
		fmt.Fprintf(w, "ok %s: %d %s passed\n", testPath, res.Cases, cases)
	}
	return res, nil
}

// preparedCase is a case checked against its connector, ready to run.
type preparedCase struct {
	name, connector string
	filter          *connector.FilterSpec
	format          cdc.Format // the sink's event format, as the runner sees it
	stops           bool       // errors.tolerance: none
	target          target
	events          []sinks.Event
	expect          []expectation
}

// apply runs ev through the connector's filter, then its sink.
func (c *preparedCase) apply(ctx context.Context, ev *sinks.Event) outcome {
	keep, err := c.filter.Keeps(ev, c.format)
	switch {
	case err != nil:
		return outcome{reason: err.Error(), stops: c.stops}
	case !keep:
		return outcome{filtered: true}
	}
	return c.target.apply(ctx, ev)
}

// outcome is what a connector made of one event: a row, a record, or a
// dead letter (or a stop, under errors.tolerance: none).
type outcome struct {
	op       cdc.Op // upsert (a row), delete (row holds the key) or skip
	row      []value
	cols     []string // the row's column names
	route    string   // the route the event took, on a routed connector
	table    string   // the table it rendered, on a routed postgres connector
	record   []byte
	reason   string // set for a dead letter or a stop
	stops    bool   // the connector would stop instead of dead-lettering
	filtered bool   // the connector's filter dropped the event
	// elems are the outcomes of the elements of an exploded event (its
	// rows, or the reasons of elements that do not convert).
	elems    []outcome
	exploded bool
}

// target is a connector's sink as far as it can run without its service.
type target interface {
	apply(ctx context.Context, ev *sinks.Event) outcome
}

func prepare(cfg *connector.Config, testPath string, f *File) ([]preparedCase, []connector.Spec, error) {
	var problems []*config.Error
	add := func(path string, err error) { problems = append(problems, &config.Error{Path: path, Err: err}) }
	if len(f.Tests) == 0 {
		add("tests", errors.New("no test cases"))
	}
	targets := map[string]target{}
	specs := map[string]*connector.Spec{}
	var names []string
	for i := range cfg.Connectors {
		specs[cfg.Connectors[i].Name] = &cfg.Connectors[i]
		names = append(names, cfg.Connectors[i].Name)
	}
	auto, err := deriveAuto(specs, filepath.Dir(testPath), f)
	if err != nil {
		add("tests", err)
	}
	var out []preparedCase
	for i, tc := range f.Tests {
		path := fmt.Sprintf("tests[%d]", i)
		if tc.Name == "" {
			add(path+".name", errors.New("required"))
		}
		spec := specs[tc.Connector]
		if spec == nil {
			add(path+".connector", fmt.Errorf("unknown connector %q (connectors: %s)", tc.Connector, strings.Join(names, ", ")))
			continue
		}
		t, ok := targets[tc.Connector]
		if !ok {
			var err error
			if t, err = newTarget(spec); err != nil {
				add(path+".connector", err)
				continue
			}
			targets[tc.Connector] = t
		}
		if len(tc.Events) == 0 {
			add(path+".events", errors.New("at least one event is required"))
		}
		if len(tc.Expect) != len(tc.Events) {
			add(path+".expect", fmt.Errorf("%d expectations for %d events (want one per event)", len(tc.Expect), len(tc.Events)))
		}
		pc := preparedCase{name: tc.Name, connector: tc.Connector, filter: spec.Filter, format: connector.ChangeEvents(spec.Sink.Config), stops: spec.Errors.Tolerance == "none", target: t}
		for j := range tc.Events {
			ev, err := tc.Events[j].event(j)
			for _, p := range config.Errors(err) {
				add(config.JoinPath(fmt.Sprintf("%s.events[%d]", path, j), p.Path), p.Err)
			}
			if err == nil {
				if err := avroEvent(spec, filepath.Dir(testPath), &tc.Events[j], &ev); err != nil {
					add(fmt.Sprintf("%s.events[%d]", path, j), err)
				}
			}
			pc.events = append(pc.events, ev)
		}
		for j := range tc.Expect {
			e, err := prepareExpect(t, &tc.Expect[j])
			for _, p := range config.Errors(err) {
				add(config.JoinPath(fmt.Sprintf("%s.expect[%d]", path, j), p.Path), p.Err)
			}
			pc.expect = append(pc.expect, e)
		}
		out = append(out, pc)
	}
	if len(problems) > 0 {
		return nil, nil, &MalformedError{Path: testPath, Problems: problems}
	}
	return out, auto, nil
}

// deriveAuto derives the columns of the `columns: auto` connectors the
// cases test, replacing their specs: from the reader schema (at load),
// or else from the schemas the cases' events are written with, in the
// order they come, as the running connector derives from the newest
// schema and grows with each writer schema that adds a field.
func deriveAuto(specs map[string]*connector.Spec, dir string, f *File) ([]connector.Spec, error) {
	writers := map[string][]hamba.Schema{}
	seen := map[string]bool{}
	var order []string
	var errs []error
	for _, tc := range f.Tests {
		spec := specs[tc.Connector]
		if spec == nil || spec.Sink.Auto == nil {
			continue
		}
		if !seen[tc.Connector] {
			seen[tc.Connector] = true
			order = append(order, tc.Connector)
		}
		if r := spec.Source.Registry; r == nil || r.ReaderSchema != "" {
			continue
		}
		for _, e := range tc.Events {
			if e.AvroSchema == "" {
				continue
			}
			w, err := schemaOf(dir, e.AvroSchema)
			if err != nil {
				continue // the event's own check reports it
			}
			writers[tc.Connector] = append(writers[tc.Connector], w)
		}
	}
	var out []connector.Spec
	for _, name := range order {
		spec := *specs[name]
		if ws := writers[name]; len(ws) > 0 {
			var err error
			if spec, err = spec.WithDerivedColumns(ws[0], ws[1:]); err != nil {
				errs = append(errs, err)
				continue
			}
		} else if r := spec.Source.Registry; r != nil && r.ReaderSchema == "" {
			errs = append(errs, fmt.Errorf("connector %q: columns: auto: no event names its avro_schema, the schema the columns are derived from", name))
			continue
		}
		specs[name] = &spec
		out = append(out, spec)
	}
	return out, errors.Join(errs...)
}

// event builds the event e describes; index is its place in its case.
func (e *Event) event(index int) (sinks.Event, error) {
	var errs []error
	ev := sinks.Event{
		Partition:    e.Partition,
		Offset:       e.Offset,
		PartitionKey: e.Key,
		ContentType:  e.ContentType,
		Properties:   e.Properties,
	}
	if ev.Partition == "" {
		ev.Partition = "0"
	}
	ev.SequenceNumber = int64(index)
	if e.SequenceNumber != nil {
		ev.SequenceNumber = *e.SequenceNumber
	}
	if ev.Offset == "" {
		ev.Offset = strconv.FormatInt(ev.SequenceNumber, 10)
	}
	ev.EnqueuedTime = e.EnqueuedTime.Time
	if ev.EnqueuedTime.IsZero() {
		ev.EnqueuedTime = DefaultEnqueuedTime
	}
	switch b := e.Body.(type) {
	case nil:
	case string:
		ev.Body = []byte(b)
	default:
		body, err := json.Marshal(b)
		if err != nil {
			errs = append(errs, &config.Error{Path: "body", Err: fmt.Errorf("cannot encode as JSON: %w", err)})
		}
		ev.Body = body
	}
	return ev, errors.Join(errs...)
}

// liner is what a sink that writes each event as one line of text (the
// stdout sink) offers `ehsink test`: the line its writer writes for an
// event, and whether that line is a JSON envelope or the body as is.
type liner interface {
	Line(ev *sinks.Event) ([]byte, error)
	Envelope() bool
}

// newTarget builds what can run of spec's sink without its destination:
// the sink's own table shape (see package sinks/table), or the line a
// line-writing sink prints. No sink package is imported: a binary tests
// the sinks it registers, through their configs.
func newTarget(spec *connector.Spec) (target, error) {
	stops := spec.Errors.Tolerance == "none"
	var shape table.Shape
	if sh, ok := spec.Sink.Config.(table.Shaper); ok {
		var err error
		if shape, err = sh.TableShape(); err != nil {
			return nil, fmt.Errorf("connector %q: %w", spec.Name, err)
		}
	}
	if !hasColumns(shape) {
		// The stdout sink without columns writes envelopes or bodies.
		if l, ok := spec.Sink.Config.(liner); ok {
			return &stdoutTarget{line: l, raw: !l.Envelope(), stops: stops}, nil
		}
		return nil, fmt.Errorf("connector %q: the sink (type %s) has no table mapping to test (no columns:); ehsink test checks the rows a mapping makes, or the stdout sink's records (a custom sink opts in with a TableShape method on its config, see package sinks/table)", spec.Name, spec.Sink.Type)
	}
	if shape.Routed {
		return newRoutedTarget(shape, stops)
	}
	return newMapTarget(shape, shape.Routes[0], stops)
}

// hasColumns reports whether every route of shape maps columns (a sink
// whose optional columns are unset maps no table).
func hasColumns(shape table.Shape) bool {
	for _, r := range shape.Routes {
		if len(r.Columns) == 0 {
			return false
		}
	}
	return len(shape.Routes) > 0
}

// mapTarget is a sink with one column mapping.
type mapTarget struct {
	mapper *mapping.Mapper
	// render renders and checks the event's destination as the sink
	// does (nil: it does not depend on the event).
	render func(*sinks.Event) (string, error)
	// rules, for a sink that deletes (format debezium, a delete block),
	// decide per event between a row, a delete of key and a skip.
	rules *cdc.Rules
	key   []string
	// check is the sink's own check of a mapped row, or nil.
	check func(row []any) error
	stops bool
}

// newMapTarget takes route r of shape as the sink compiled it (its
// Mapper and Rules), or, for a sink that gives only the route's columns,
// compiles them (those its key names made non-nullable) and the shape's
// delete rules.
func newMapTarget(shape table.Shape, r table.Route, stops bool) (*mapTarget, error) {
	if r.Mapper != nil {
		t := &mapTarget{mapper: r.Mapper, render: r.Render, check: r.Check, stops: stops}
		t.rules, t.key = r.Rules, r.Key // nil: no event deletes or skips
		return t, nil
	}
	cols := slices.Clone(r.Columns)
	for i := range cols {
		if slices.Contains(r.Key, cols[i].Name) {
			cols[i].Nullable = false
		}
	}
	m, err := mapping.CompileWith(cols, mapping.Options{Explode: r.Explode})
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	t := &mapTarget{mapper: m, render: r.Render, stops: stops}
	return t, t.deleting(shape.Format, shape.Delete, r.Key)
}

// deleting gives t the rules of a sink's format and delete block, when
// they make some events deletes or skips.
func (t *mapTarget) deleting(format cdc.Format, del *cdc.Delete, key []string) error {
	cs := cdc.Spec{Format: format, Delete: del, Columns: t.mapper.Columns(), Key: key}
	if !cs.Deletes() {
		return cs.Validate()
	}
	if t.mapper.Explode().IsSet() {
		return errors.New("explode does not combine with deletes (format: debezium or a delete block)")
	}
	r, err := cdc.Compile(cs)
	if err != nil {
		return err
	}
	t.rules, t.key = r, key
	return nil
}

func (t *mapTarget) apply(_ context.Context, ev *sinks.Event) outcome {
	var dest string
	if t.render != nil {
		d, err := t.render(ev)
		if err != nil {
			return outcome{reason: err.Error(), stops: t.stops}
		}
		dest = d
	}
	out := t.rows(ev)
	out.table = dest
	return out
}

// rows maps ev to its row, its delete or skip, or its exploded rows.
func (t *mapTarget) rows(ev *sinks.Event) outcome {
	cols := t.mapper.Columns()
	if t.rules != nil {
		row := make([]any, len(cols))
		op, err := t.rules.Map(ev, row)
		if err == nil && op != cdc.OpSkip && t.check != nil {
			err = t.check(row)
		}
		switch {
		case err != nil:
			return outcome{reason: err.Error(), stops: t.stops}
		case op == cdc.OpSkip:
			return outcome{op: op}
		}
		out := outcome{op: op, row: make([]value, len(cols)), cols: cols.Names()}
		for i, v := range row {
			out.row[i] = gotValue(cols[i], v)
		}
		return out
	}
	rows, err := t.mapper.Rows(ev)
	if err != nil {
		return outcome{reason: err.Error(), stops: t.stops}
	}
	defer rows.Close()
	one := func(j int) outcome {
		row := make([]any, len(cols))
		if err := rows.Map(j, row); err != nil {
			return outcome{reason: err.Error(), stops: t.stops}
		}
		if t.check != nil {
			if err := t.check(row); err != nil {
				if rows.Exploded() {
					err = &mapping.ElementError{Index: j, Err: err}
				}
				return outcome{reason: err.Error(), stops: t.stops}
			}
		}
		out := outcome{row: make([]value, len(cols)), cols: cols.Names()}
		for i, v := range row {
			out.row[i] = gotValue(cols[i], v)
		}
		return out
	}
	if !rows.Exploded() {
		return one(0)
	}
	out := outcome{exploded: true, elems: []outcome{}}
	for j := range rows.Len() {
		out.elems = append(out.elems, one(j))
	}
	return out
}

type stdoutTarget struct {
	line  liner
	raw   bool // the line is the body alone, not the JSON envelope
	stops bool
}

// apply makes the line the sink's writer makes of ev.
func (t *stdoutTarget) apply(_ context.Context, ev *sinks.Event) outcome {
	line, err := t.line.Line(ev)
	if err != nil {
		return outcome{reason: err.Error(), stops: t.stops}
	}
	return outcome{record: line}
}
