package connector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	hamba "github.com/hamba/avro/v2"

	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// AutoColumns is a sink's `columns: auto`: its columns are derived from
// the connector's Avro schema (see [avro.Columns]) rather than written.
type AutoColumns struct {
	// Flatten is the sink's `flatten`: a nested record's fields are
	// columns of their own, named parent_child; if false, the record is
	// one json column.
	Flatten bool
	// raw is the sink's block without columns and flatten, decoded again
	// into a new config each time the columns are derived.
	raw map[string]any
	// newConfig is the sink driver's NewConfig.
	newConfig func() any
}

// errColumnsGrew is returned by a partition's decode for an event whose
// writer schema has a field the derived columns lack: the connector
// restarts, derives its columns again and its sink adds the column
// (evolve) before that event is written.
var errColumnsGrew = errors.New("an event's writer schema has a field the columns lack")

// errAutoColumns is wrapped by the error of columns that cannot be
// derived from a schema the registry answered (waiting would not help).
var errAutoColumns = errors.New("columns: auto")

// derived is what deriveAtStart found.
type derived struct {
	cfg  any
	cols mapping.Columns
}

// deriveAtStart derives the columns of a starting connector from its
// reader schema or the registry's newest, then the registry's older
// versions (a field a newer version dropped keeps its column, whichever
// process writes), then the writer schemas that grew them in earlier runs
// of this process (extra). An error not wrapping errAutoColumns is the
// registry's: nothing is registered under the subject yet, or it cannot
// be reached; the caller waits it out.
func deriveAtStart(ctx context.Context, spec Spec, dec *schemaregistry.Decoder, extra []hamba.Schema) (derived, error) {
	base, older, err := baseSchema(ctx, spec.Source, dec.Registry())
	if err != nil {
		if errors.Is(err, schemaregistry.ErrUnknownSchema) {
			err = fmt.Errorf("nothing registered yet under %s: %w", spec.Source.Registry.Subject, err)
		}
		return derived{}, err
	}
	// An older version whose columns cannot be derived (a name taken
	// twice) adds nothing, as such a writer schema's would (autoState).
	older = slices.DeleteFunc(older, func(s hamba.Schema) bool {
		_, err := avro.Columns(s, avro.ColumnOptions{Flatten: spec.Sink.Auto.Flatten})
		return err != nil
	})
	cfg, cols, err := deriveSink(spec, base, append(older, extra...))
	if err != nil {
		return derived{}, fmt.Errorf("%w: %w", errAutoColumns, err)
	}
	return derived{cfg, cols}, nil
}

// takeAuto takes `columns: auto` and `flatten` out of a sink block,
// leaving the metadata columns in their place, so that the sink's decoder
// and validator check the rest of the block as they would with a written
// mapping. It returns nil when the block writes its columns.
func takeAuto(path string, raw map[string]any) (*AutoColumns, error) {
	flatten, hasFlatten := raw["flatten"]
	cols, ok := raw["columns"].(string)
	if !ok || !strings.EqualFold(strings.TrimSpace(cols), "auto") {
		if hasFlatten {
			return nil, &config.Error{Path: path + ".flatten", Err: errors.New("used only with columns: auto")}
		}
		return nil, nil
	}
	a := &AutoColumns{}
	delete(raw, "flatten")
	switch f := flatten.(type) {
	case nil:
	case bool:
		a.Flatten = f
	default:
		return nil, &config.Error{Path: path + ".flatten", Err: fmt.Errorf("want true or false, not %v", f)}
	}
	if _, routed := raw["routes"]; routed {
		return nil, &config.Error{Path: path + ".columns", Err: errors.New("auto is for a sink without routes (each route lists its columns)")}
	}
	delete(raw, "columns")
	a.raw = maps.Clone(raw)
	empty, err := hamba.NewRecordSchema("none", "", nil)
	if err != nil {
		return nil, err
	}
	meta, err := avro.Columns(empty, avro.ColumnOptions{})
	if err != nil {
		return nil, err
	}
	raw["columns"] = columnsConfig(meta)
	return a, nil
}

// columnsConfig writes cols as a mapping's list form, in their order.
func columnsConfig(cols mapping.Columns) []any {
	out := make([]any, len(cols))
	for i, c := range cols {
		out[i] = map[string]any{"name": c.Name, "from": c.From.String(), "type": c.Type.String(), "nullable": c.Nullable}
	}
	return out
}

// validateAuto refuses columns: auto where no schema says what the
// columns are.
func (s *Spec) validateAuto(path string, p *problems) {
	a := s.Sink.Auto
	if a == nil {
		return
	}
	src := s.Source
	if src.Format != FormatAvro {
		p.add(path+".sink.columns", "auto: connector %q reads JSON events (source.format: json), whose columns no schema states; list the columns (columns: {name: $.path, ...})", s.Name)
		return
	}
	if r := src.Registry; r != nil && r.ReaderSchema == "" && r.Subject == "" {
		p.add(path+".source.registry.subject", "required with columns: auto and no reader_schema: the schema name (azure, in group) or subject (confluent) whose newest version the columns are derived from")
	}
	if r := src.Registry; r != nil && r.Type == RegistryAzure && r.ReaderSchema == "" && r.Group == "" {
		p.add(path+".source.registry.group", "required with columns: auto and no reader_schema (the group the schema is registered in)")
	}
}

// deriveSink derives the columns of spec's `columns: auto` from base
// (the reader schema, or the registry's newest) and then the writer
// schemas that grew them since the connector started (extra, in the order
// seen), and returns the sink config decoded and validated with them.
// Columns are never dropped: a field an older schema had keeps its column.
func deriveSink(spec Spec, base hamba.Schema, extra []hamba.Schema) (any, mapping.Columns, error) {
	a := spec.Sink.Auto
	opts := avro.ColumnOptions{Flatten: a.Flatten, AllNullable: spec.Source.Registry.ReaderSchema == ""}
	cols, err := avro.Columns(base, opts)
	if err != nil {
		return nil, nil, err
	}
	for _, w := range extra {
		more, err := avro.Columns(w, opts)
		if err != nil {
			return nil, nil, err
		}
		for _, c := range more {
			if cols.Index(c.Name) < 0 {
				cols = append(cols, c)
			}
		}
	}
	raw := maps.Clone(a.raw)
	raw["columns"] = columnsConfig(cols)
	cfg := a.newConfig()
	if err := config.Decode(raw, cfg); err != nil {
		return nil, nil, err
	}
	if v, ok := cfg.(sinks.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, nil, err
		}
	}
	return cfg, cols, nil
}

// WithDerivedColumns returns spec with its `columns: auto` sink's config
// derived from base and then extra, as a running connector derives it
// from the registry's newest schema and the writer schemas its events
// bring (`ehsink test` derives from the schemas its events name).
func (s Spec) WithDerivedColumns(base hamba.Schema, extra []hamba.Schema) (Spec, error) {
	if s.Sink.Auto == nil || s.Source.Registry == nil {
		return s, nil
	}
	cfg, _, err := deriveSink(s, base, extra)
	if err != nil {
		return s, fmt.Errorf("connector %q: sink.columns: auto: %w", s.Name, err)
	}
	s.Sink.Config = cfg
	return s, nil
}

// baseSchema is the schema columns: auto starts from: the reader schema,
// or the newest the registry holds under the source's subject, with the
// older versions that parse, oldest first.
func baseSchema(ctx context.Context, src SourceSpec, reg schemaregistry.Client) (base hamba.Schema, older []hamba.Schema, err error) {
	r := src.Registry
	if r.ReaderSchema != "" {
		base, err := readSchemaFile(r.ReaderSchema)
		return base, nil, err
	}
	var texts []string
	switch c := reg.(type) {
	case *schemaregistry.Azure:
		texts, err = c.Versions(ctx, r.Group, r.Subject)
	case *schemaregistry.Confluent:
		texts, err = c.Versions(ctx, r.Subject)
	default:
		return nil, nil, fmt.Errorf("a %T registry cannot list schemas", reg)
	}
	if err != nil {
		return nil, nil, err
	}
	last := len(texts) - 1
	if base, err = avro.ParseSchema(texts[last]); err != nil {
		return nil, nil, fmt.Errorf("the newest schema of %s: %w", r.Subject, err)
	}
	for _, text := range texts[:last] {
		if s, err := avro.ParseSchema(text); err == nil {
			older = append(older, s)
		}
	}
	return base, older, nil
}

// autoState is what a running connector with columns: auto knows of the
// writer schemas its partitions meet. It is safe for concurrent use.
type autoState struct {
	opts  avro.ColumnOptions
	names map[string]bool // the derived columns
	// grew records a writer schema with a new field for the next
	// derivation and asks for the connector's restart.
	grew func(w hamba.Schema)

	mu   sync.Mutex      // guards seen
	seen map[string]bool // writer schema id -> it has a field the columns lack
}

func newAutoState(spec Spec, cols mapping.Columns, grew func(hamba.Schema)) *autoState {
	a := &autoState{opts: avro.ColumnOptions{Flatten: spec.Sink.Auto.Flatten, AllNullable: true}, names: map[string]bool{}, grew: grew, seen: map[string]bool{}}
	for _, n := range cols.Names() {
		a.names[n] = true
	}
	return a
}

// grows reports whether the writer schema w (of id) has a field whose
// column is not among the derived ones; the first time it finds one, it
// calls grew.
func (a *autoState) grows(id string, w hamba.Schema) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g, ok := a.seen[id]; ok {
		return g
	}
	cols, err := avro.Columns(w, a.opts)
	g := false
	// A writer schema whose columns cannot be derived (a name taken twice)
	// adds nothing: its events map with the columns there are.
	if err == nil {
		for _, n := range cols.Names() {
			if !a.names[n] {
				g = true
			}
		}
	}
	a.seen[id] = g
	if g {
		a.grew(w)
	}
	return g
}
