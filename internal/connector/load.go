package connector

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/sinks"
)

// LoadOptions configure [Load]. The zero value loads with the global sink
// registry and the process environment.
type LoadOptions struct {
	// Registry resolves sink types. If nil, the drivers registered with
	// [sinks.Register] (see [sinks.Registry]).
	Registry *sinks.Registry
	// Getenv looks up variables for ${VAR} expansion. If nil, os.Getenv.
	Getenv func(string) string
	// Ignore, if set, drops the problems whose path it returns true for
	// (such as connectors[0].source.connection), so that a command that
	// uses only part of a config (ehsink test: the filters and sinks'
	// mappings) does not require the rest, nor the variables it reads.
	Ignore func(path string) bool
	// Environ lists the environment as KEY=value strings, for the EHSINK_
	// overrides. If nil, os.Environ when Getenv is nil too; when Getenv is
	// set and Environ is nil, no overrides are read, so that a caller that
	// injects Getenv (a test) never sees the process environment.
	Environ func() []string
}

// Load reads a connectors.yaml file, applies the EHSINK_ environment
// overrides, expands ${VAR} references, decodes it strictly (the `sink:`
// block of each connector into the config of its registered driver), fills
// in the defaults and validates the result. The error reports every
// problem, as [*config.Error] values with paths such as
// `connectors[1].sink.table`, joined with errors.Join; [config.Errors] lists
// them.
func Load(path string, opts LoadOptions) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(file.Provider(path), varSafeYAML{}); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, err // "open connectors.yaml: no such file or directory"
		}
		return nil, fmt.Errorf("%s: %w", path, err) // "connectors.yaml: yaml: line 3: ..."
	}
	return load(k.Raw(), opts)
}

// load is Load after the file is read: raw is the file's tree.
func load(raw map[string]any, opts LoadOptions) (*Config, error) {
	reg := opts.Registry // nil: the drivers sinks.Register added
	getenv, environ := opts.Getenv, opts.Environ
	if getenv == nil {
		getenv = os.Getenv
		if environ == nil {
			environ = os.Environ
		}
	}
	if raw == nil {
		raw = map[string]any{}
	}

	var errs []error
	if environ != nil {
		errs = append(errs, applyEnv(raw, environ)...)
	}
	expanded, err := config.Expand(raw, getenv)
	errs = append(errs, err)
	tree, _ := expanded.(map[string]any)
	sinkRaws := splitSinks(tree)

	var c Config
	errs = append(errs, config.Decode(tree, &c))
	var sinkErrs []*config.Error // what the sink decoders said
	for i := range c.Connectors {
		var sinkRaw map[string]any
		if i < len(sinkRaws) {
			sinkRaw = sinkRaws[i]
		}
		path := fmt.Sprintf("connectors[%d].sink", i)
		auto, err := takeAuto(path, sinkRaw)
		c.Connectors[i].Sink.Auto = auto
		if err == nil {
			err = decodeSink(path, &c.Connectors[i].Sink, sinkRaw, reg)
		}
		if d, lerr := reg.Lookup(c.Connectors[i].Sink.Type); auto != nil && lerr == nil {
			auto.newConfig = d.NewConfig
		}
		sinkErrs = append(sinkErrs, config.Errors(err)...)
		errs = append(errs, err)
	}
	full := c.withDefaults()
	verr := withoutRepeats(full.validate(), sinkErrs)
	errs = append(errs, verr)
	if verr == nil {
		errs = append(errs, deriveFromReaders(full))
	}
	if err := errors.Join(errs...); err != nil {
		if err = joinProblems(err, opts.Ignore); err != nil {
			return nil, err
		}
	}
	return full, nil
}

// deriveFromReaders derives the columns of every `columns: auto` sink
// whose connector has a reader_schema (no registry needed), so that
// validate checks and prints them; the others are derived at start.
func deriveFromReaders(c *Config) error {
	var errs []error
	for i := range c.Connectors {
		s := &c.Connectors[i]
		r := s.Source.Registry
		if s.Sink.Auto == nil || r == nil || r.ReaderSchema == "" {
			continue
		}
		path := fmt.Sprintf("connectors[%d].sink", i)
		base, err := readSchemaFile(r.ReaderSchema)
		if err == nil {
			s.Sink.Config, _, err = deriveSink(*s, base, nil)
		}
		if err != nil {
			errs = append(errs, sinkProblems(path, fmt.Errorf("columns: auto from %s: %w", r.ReaderSchema, err))...)
		}
	}
	return errors.Join(errs...)
}

// joinProblems flattens err into its *config.Error problems, without
// duplicates, joined again. A value that holds an unset ${VAR} gets that
// one problem: the others about it (not a connection string, ...) follow
// from it. Problems whose path ignore returns true for are dropped.
func joinProblems(err error, ignore func(string) bool) error {
	all := config.Errors(err)
	unset := map[string]bool{}
	for _, p := range all {
		var ue *config.UnsetError
		if errors.As(p.Err, &ue) {
			unset[p.Path] = true
		}
	}
	var out []error
	seen := map[string]bool{}
	for _, p := range all {
		var ue *config.UnsetError
		switch key := p.Error(); {
		case ignore != nil && ignore(p.Path), seen[key]:
		case unset[p.Path] && !errors.As(p.Err, &ue):
		default:
			seen[key] = true
			out = append(out, p)
		}
	}
	return errors.Join(out...)
}

// splitSinks takes the driver-specific keys out of every connector's `sink:`
// block, leaving only `type` for the Config decoder, and returns them by
// connector index (nil where a connector has no sink map).
func splitSinks(tree map[string]any) []map[string]any {
	list, ok := tree["connectors"].([]any)
	if !ok {
		return nil
	}
	out := make([]map[string]any, len(list))
	for i, item := range list {
		conn, ok := item.(map[string]any)
		if !ok {
			continue
		}
		sink, ok := conn["sink"].(map[string]any)
		if !ok {
			continue
		}
		rest := maps.Clone(sink)
		delete(rest, "type")
		out[i] = rest
		kept := map[string]any{}
		if t, ok := sink["type"]; ok {
			kept["type"] = t
		}
		conn["sink"] = kept
	}
	return out
}

// withoutRepeats drops the problems of err (validate's) about a key a
// sink decoder already complained of, or about a key above or below one (a
// value that did not decode is left zero, and its validator would say
// "required" there too), or about the key an unknown one is a typo of.
func withoutRepeats(err error, decoded []*config.Error) error {
	if len(decoded) == 0 {
		return err
	}
	var paths []string
	for _, d := range decoded {
		paths = append(paths, d.Path)
		if uk, ok := errors.AsType[*config.UnknownKeyError](d.Err); ok {
			if i := strings.LastIndexAny(d.Path, ".["); i >= 0 {
				paths = append(paths, d.Path[:i+1]+uk.Suggestion)
			}
		}
	}
	var out []error
	for _, p := range config.Errors(err) {
		if !slices.ContainsFunc(paths, func(d string) bool { return nested(p.Path, d) || nested(d, p.Path) }) {
			out = append(out, p)
		}
	}
	return errors.Join(out...)
}

// nested reports whether path is inner or a key under it.
func nested(path, inner string) bool {
	rest, ok := strings.CutPrefix(path, inner)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// decodeSink looks up the sink type in reg and decodes raw into a new
// config of that driver, stored in s.Config. A missing type is left to
// validate. A config that does not decode whole is stored too, so that
// validate checks the keys that did decode (a connection string beside a
// mistyped duration); [withoutRepeats] keeps its validator from repeating
// the decoder's complaints.
func decodeSink(path string, s *SinkSpec, raw map[string]any, reg *sinks.Registry) error {
	if s.Type == "" {
		return nil
	}
	d, err := reg.Lookup(s.Type)
	if err != nil {
		hint := ""
		if near := config.Suggest(s.Type, reg.Names()); near != "" {
			hint = "did you mean " + near + "? "
		}
		return &config.Error{Path: path + ".type", Err: fmt.Errorf("unknown sink %s (%sknown: %s)", config.Quote(s.Type), hint, strings.Join(reg.Names(), ", "))}
	}
	cfg := d.NewConfig()
	if cfg == nil {
		return &config.Error{Path: path + ".type", Err: fmt.Errorf("sink %q: driver returned no config", s.Type)}
	}
	s.Config = cfg
	return config.Prefix(path, config.Decode(raw, cfg))
}
