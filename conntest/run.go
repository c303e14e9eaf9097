package conntest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ehsink/ehsink/cdc"
	"github.com/ehsink/ehsink/config"
	"github.com/ehsink/ehsink/connector"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/sinks"
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
	cases, err := prepare(cfg, testPath, f)
	if err != nil {
		return Result{}, err
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

func prepare(cfg *connector.Config, testPath string, f *File) ([]preparedCase, error) {
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
		return nil, &MalformedError{Path: testPath, Problems: problems}
	}
	return out, nil
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

// newTarget builds what can run of spec's sink: the compiled column mapping
// of a table-shaped sink, or the stdout sink's line format.
func newTarget(spec *connector.Spec) (target, error) {
	stops := spec.Errors.Tolerance == "none"
	if _, mapped := columnsOf(spec.Sink.Config); spec.Sink.Type == "stdout" && !mapped {
		// The envelope (or the raw body); with columns, the stdout sink
		// writes rows, checked as those of the table sinks are.
		format, _ := stringField(spec.Sink.Config, "format")
		return &stdoutTarget{raw: format == "raw", stops: stops}, nil
	}
	format, del := changesOf(spec.Sink.Config)
	if routes, ok := routesOf(spec.Sink.Config); ok {
		return newRoutedTarget(routes, format, del, stops)
	}
	cols, ok := columnsOf(spec.Sink.Config)
	if !ok {
		return nil, fmt.Errorf("connector %q: the sink (type %s) has no table mapping to test (no columns:); ehsink test checks the rows a mapping makes, or the stdout sink's records", spec.Name, spec.Sink.Type)
	}
	v, _ := structOf(spec.Sink.Config)
	t, err := newMapTargetWith(cols, mapping.Options{Explode: explodeOfStruct(v)}, stops)
	if err != nil {
		return nil, err
	}
	return t, t.deleting(format, del, keyOf(v))
}

// changesOf finds, by reflection, the fields of types cdc.Format and
// *cdc.Delete of a sink config (the postgres sink's format and delete),
// which say which events delete their key or are skipped.
func changesOf(cfg any) (cdc.Format, *cdc.Delete) {
	var format cdc.Format
	var del *cdc.Delete
	v, ok := structOf(cfg)
	if !ok {
		return format, del
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch {
		case !f.IsExported():
		case f.Type == reflect.TypeFor[cdc.Format]():
			format = v.Field(i).Interface().(cdc.Format)
		case f.Type == reflect.TypeFor[*cdc.Delete]():
			del = v.Field(i).Interface().(*cdc.Delete)
		}
	}
	return format, del
}

// keyOf returns the `key:` list of strings of a struct value (a sink
// config or one of its routes), or nil.
func keyOf(v reflect.Value) []string {
	if !v.IsValid() {
		return nil
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type == reflect.TypeFor[[]string]() && yamlName(f) == "key" {
			return v.Field(i).Interface().([]string)
		}
	}
	return nil
}

// explodeOfStruct returns the exploded path of a sink config (or of one of
// its routes): its field of type mapping.Path whose key is explode.
func explodeOfStruct(v reflect.Value) mapping.Path {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type == reflect.TypeFor[mapping.Path]() && yamlName(f) == "explode" {
			return v.Field(i).Interface().(mapping.Path)
		}
	}
	return mapping.Path{}
}

// columnsOf finds the mapping of a sink config by reflection, so that no
// sink package is linked for it: the field of type mapping.Columns (the
// postgres and parquet sinks', or a custom sink's). The columns a `key:`
// list of strings names are made non-nullable, as the PostgreSQL sink
// makes its upsert key: a row without its key cannot be written.
func columnsOf(cfg any) (mapping.Columns, bool) {
	v, ok := structOf(cfg)
	if !ok {
		return nil, false
	}
	return columnsOfStruct(v)
}

// columnsOfStruct is columnsOf for a struct value (a sink config or one of
// its routes).
func columnsOfStruct(v reflect.Value) (mapping.Columns, bool) {
	var cols mapping.Columns
	var key []string
	found := false
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch {
		case !f.IsExported():
		case f.Type == reflect.TypeFor[mapping.Columns]():
			cols, found = slices.Clone(v.Field(i).Interface().(mapping.Columns)), true
		case f.Type == reflect.TypeFor[[]string]() && yamlName(f) == "key":
			key = v.Field(i).Interface().([]string)
		}
	}
	for i := range cols {
		if slices.Contains(key, cols[i].Name) {
			cols[i].Nullable = false
		}
	}
	// A sink whose columns are optional and unset maps no table: nothing
	// to test, rather than a mapping of no columns (which reads as a
	// config error: "at least one column is required").
	return cols, found && len(cols) > 0
}

// mapTarget is a sink with one column mapping.
type mapTarget struct {
	mapper *mapping.Mapper
	// rules, for a sink that deletes (format debezium, a delete block),
	// decide per event between a row, a delete of key and a skip.
	rules *cdc.Rules
	key   []string
	stops bool
}

func newMapTargetWith(cols mapping.Columns, opts mapping.Options, stops bool) (*mapTarget, error) {
	m, err := mapping.CompileWith(cols, opts)
	if err != nil {
		return nil, fmt.Errorf("columns: %w", err)
	}
	return &mapTarget{mapper: m, stops: stops}, nil
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
	cols := t.mapper.Columns()
	if t.rules != nil {
		row := make([]any, len(cols))
		op, err := t.rules.Map(ev, row)
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
	raw   bool // format: raw, the body alone; else the JSON envelope
	stops bool
}

// apply makes the stdout sink's line of ev: the body (format: raw) or the
// envelope of [record.NewEvent], encoded as the sink's writer encodes
// it. The sink's package is not imported, so that a binary whose sinks do
// not include stdout does not get it registered by this package.
func (t *stdoutTarget) apply(_ context.Context, ev *sinks.Event) outcome {
	if t.raw {
		return outcome{record: slices.Clone(ev.Body)}
	}
	line, err := json.Marshal(record.NewEvent(ev))
	if err != nil {
		return outcome{reason: fmt.Sprintf("encode envelope: %v", err), stops: t.stops}
	}
	return outcome{record: line}
}

// stringField returns the string field of the struct cfg points to whose
// yaml tag is name.
func stringField(cfg any, name string) (string, bool) {
	v, ok := structOf(cfg)
	if !ok {
		return "", false
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.String && yamlName(f) == name {
			return v.Field(i).String(), true
		}
	}
	return "", false
}

// structOf returns the struct a sink config points to.
func structOf(cfg any) (reflect.Value, bool) {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}, false
		}
		v = v.Elem()
	}
	return v, v.Kind() == reflect.Struct
}

// yamlName is the key of a struct field in YAML.
func yamlName(f reflect.StructField) string {
	return strings.Split(f.Tag.Get("yaml"), ",")[0]
}
