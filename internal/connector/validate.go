package connector

import (
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/internal/connstr"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/sinks"
)

// EmulatorConnection is the value of `source.connection` that connects a
// connector to the in-process emulator declared by the `emulator:` block.
const EmulatorConnection = "emulator"

// Validate checks c, with its defaults filled in (a zero field that has a
// default is valid), and reports every problem at once, as [*config.Error]
// values with their paths, joined with errors.Join. It calls the Validate
// method of every sink config that has one ([sinks.Validator]). It does not
// check that sink types are registered: [Load] does, with its registry.
func (c *Config) Validate() error {
	return c.withDefaults().validate()
}

// problems collects config problems.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &config.Error{Path: path, Err: fmt.Errorf(format, args...)})
}

// validate checks a config whose defaults are filled in.
func (c *Config) validate() error {
	var p problems
	if len(c.Connectors) == 0 {
		p.add("connectors", "at least one connector is required")
	}
	if c.DrainTimeout < 0 {
		p.add("drain_timeout", "must be positive, got %s", c.DrainTimeout)
	}
	if c.Emulator != nil {
		c.Emulator.validate("emulator", &p)
	}
	if c.HTTP != nil {
		if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			p.add("http.listen", "want HOST:PORT (e.g. 127.0.0.1:9464, or 0.0.0.0:9464 to be reached from outside): %v", err)
		}
		if _, err := c.HTTP.OpsToken(); err != nil {
			key := "http.token_file"
			if c.HTTP.TokenFile == "" {
				key = "http.token"
			}
			p.add(key, "%v", err)
		}
		if c.HTTP.LagInterval < 0 {
			p.add("http.lag_interval", "must be positive, got %s", c.HTTP.LagInterval)
		}
	}
	firstUse := map[string]int{}
	for i := range c.Connectors {
		s := &c.Connectors[i]
		path := fmt.Sprintf("connectors[%d]", i)
		if s.Name != "" {
			if j, dup := firstUse[s.Name]; dup {
				p.add(path+".name", "duplicate connector name %s (also connectors[%d]): names must be unique, they key checkpoints and sink state", config.Quote(s.Name), j)
			} else {
				firstUse[s.Name] = i
			}
		}
		s.validate(path, c.Emulator, &p)
	}
	return errors.Join(p...)
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (s *Spec) validate(path string, emu *EmulatorSpec, p *problems) {
	switch {
	case s.Name == "":
		p.add(path+".name", "required")
	case !nameRE.MatchString(s.Name):
		p.add(path+".name", "%s: use letters, digits, '.', '_' and '-' (it names files and metrics)", config.Quote(s.Name))
	}
	s.Source.validate(path+".source", emu, p)
	s.Source.validateFormat(path+".source", p)
	s.Checkpoint.validate(path+".checkpoint", p)
	if s.Filter != nil {
		s.Filter.validate(path+".filter", p)
	}
	s.Sink.validate(path+".sink", p)
	s.validateAuto(path, p)
	s.Errors.validate(path+".errors", p)
}

func (s *SourceSpec) validate(path string, emu *EmulatorSpec, p *problems) {
	conn := s.Connection.Reveal()
	var (
		entityPath string
		badConn    bool // the connection string does not parse
	)
	switch {
	case conn == "" && s.Namespace == "":
		p.add(path+".connection", "required: set connection (a connection string, or %q) or namespace", EmulatorConnection)
	case conn != "" && s.Namespace != "":
		p.add(path+".namespace", "set connection or namespace, not both")
	case conn == EmulatorConnection:
		if emu == nil {
			p.add(path+".connection", "%q needs an emulator: block at the top level of the file", EmulatorConnection)
		} else if s.EventHub != "" {
			if _, ok := emu.Hubs[s.EventHub]; !ok {
				p.add(path+".eventhub", "%s is not a hub of the emulator (hubs: %s)", config.Quote(s.EventHub), strings.Join(slices.Sorted(maps.Keys(emu.Hubs)), ", "))
			}
		}
	case conn != "":
		props, err := connstr.EventHubs(conn)
		if err != nil {
			p.add(path+".connection", "%v, nor %q", err, EmulatorConnection)
			badConn = true
		} else if props.EntityPath != nil {
			entityPath = *props.EntityPath
		}
	case s.Namespace != "":
		if !strings.Contains(s.Namespace, ".") || strings.Contains(s.Namespace, "/") {
			p.add(path+".namespace", "%s: write the fully qualified namespace, NAME.servicebus.windows.net", config.Quote(s.Namespace))
		}
	}
	if s.Credential != "" && s.Namespace == "" {
		p.add(path+".credential", "used only with namespace (a connection string carries its own key)")
	} else if s.Credential != "" && s.Credential != defaultCredential {
		p.add(path+".credential", "%s: only %q (DefaultAzureCredential) is supported", config.Quote(s.Credential), defaultCredential)
	}
	switch {
	case s.EventHub == "" && entityPath == "" && !badConn:
		// With a connection string that does not parse (an unset
		// ${VAR}), its EntityPath is unknown: one problem, not two.
		p.add(path+".eventhub", "required (the connection string has no EntityPath)")
	case s.EventHub != "" && entityPath != "" && s.EventHub != entityPath:
		p.add(path+".eventhub", "%s differs from the connection string's EntityPath %s", config.Quote(s.EventHub), config.Quote(entityPath))
	}
	// The settings are the source's: it checks them, naming the keys of
	// this block, for validate here and for run in source.New alike.
	for _, e := range config.Errors(config.Prefix(path, s.Settings.Validate())) {
		*p = append(*p, e)
	}
}

func checkEnum(p *problems, path, v string, allowed ...string) {
	if err := config.OneOf(v, allowed...); err != nil {
		*p = append(*p, &config.Error{Path: path, Err: err})
	}
}

var containerRE = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$`)

func (c *CheckpointSpec) validate(path string, p *problems) {
	if c.Blob != nil && c.File != nil {
		p.add(path, "set blob or file, not both")
	}
	if b := c.Blob; b != nil {
		bp := path + ".blob"
		if field, err := connstr.Blob(b.Connection.Reveal(), b.AccountURL); err != nil {
			p.add(bp+"."+field, "%v", err)
		}
		switch {
		case b.Container == "":
			p.add(bp+".container", "required")
		case !containerRE.MatchString(b.Container):
			p.add(bp+".container", "%s: a container name has 3 to 63 lower-case letters, digits and single hyphens", config.Quote(b.Container))
		}
	}
	if c.File != nil && c.File.Dir == "" {
		p.add(path+".file.dir", "required")
	}
	if c.EveryEvents < 0 {
		p.add(path+".every_events", "must not be negative, got %d", c.EveryEvents)
	}
	if c.EveryInterval < 0 {
		p.add(path+".every_interval", "must not be negative, got %s", c.EveryInterval)
	}
}

func (s *SinkSpec) validate(path string, p *problems) {
	if s.Type == "" {
		p.add(path+".type", "required")
		return
	}
	v, ok := s.Config.(sinks.Validator)
	if !ok {
		return
	}
	*p = append(*p, sinkProblems(path, v.Validate())...)
}

// sinkProblems maps the errors of a sink's Validate to problems with full
// paths: *sinks.FieldError and *config.Error paths are relative to the sink
// block; other errors are about the block as a whole.
func sinkProblems(path string, err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, sinkProblems(path, e)...)
		}
		return out
	}
	var fe *sinks.FieldError
	if errors.As(err, &fe) {
		return sinkProblems(config.JoinPath(path, fe.Field), fe.Err)
	}
	var out []error
	for _, e := range config.Errors(err) {
		out = append(out, &config.Error{Path: config.JoinPath(path, e.Path), Err: e.Err})
	}
	return out
}

func (e *ErrorsSpec) validate(path string, p *problems) {
	checkEnum(p, path+".tolerance", e.Tolerance, "none", "all")
	r := e.Retry
	checkBackoff(p, path+".retry", "initial_backoff", r.InitialBackoff, "max_backoff", r.MaxBackoff)
	if r.MaxAttempts < 0 {
		p.add(path+".retry.max_attempts", "must not be negative, got %d", r.MaxAttempts)
	}
	b := e.CircuitBreaker
	if b.Failures < 0 {
		p.add(path+".circuit_breaker.failures", "must not be negative, got %d", b.Failures)
	}
	checkBackoff(p, path+".circuit_breaker", "probe_interval", b.ProbeInterval, "max_probe_interval", b.MaxProbeInterval)
	if e.SinkTimeout < 0 {
		p.add(path+".sink_timeout", "must be positive, got %s", e.SinkTimeout)
	}
}

// checkBackoff checks a first wait and its cap: both positive, the cap not
// below the first.
func checkBackoff(p *problems, path, firstKey string, first time.Duration, capKey string, limit time.Duration) {
	if first < 0 {
		p.add(path+"."+firstKey, "must be positive, got %s", first)
	}
	if limit < 0 {
		p.add(path+"."+capKey, "must be positive, got %s", limit)
	} else if first > 0 && limit > 0 && limit < first {
		p.add(path+"."+capKey, "%s is less than %s (%s)", limit, firstKey, first)
	}
}

func (e *EmulatorSpec) validate(path string, p *problems) {
	if _, port, err := net.SplitHostPort(e.Listen); err != nil {
		p.add(path+".listen", "%s: write HOST:PORT, e.g. 127.0.0.1:5672 (port 0 picks a free one)", config.Quote(e.Listen))
	} else if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		p.add(path+".listen", "%s: the port must be a number from 0 to 65535", config.Quote(e.Listen))
	}
	for _, hub := range slices.Sorted(maps.Keys(e.Hubs)) {
		if n := e.Hubs[hub]; n < 1 || n > 1024 {
			p.add(config.JoinPath(path+".hubs", hub), "%d partitions: must be from 1 to 1024", n)
		}
	}
	for i, g := range e.ConsumerGroups {
		if g == "" {
			p.add(fmt.Sprintf("%s.consumer_groups[%d]", path, i), "empty consumer group name")
		}
	}
	if d := e.Demo; d != nil {
		if _, ok := e.Hubs[d.EventHub]; !ok {
			p.add(path+".demo.eventhub", "%s is not one of the emulator's hubs (%s)", config.Quote(d.EventHub), strings.Join(slices.Sorted(maps.Keys(e.Hubs)), ", "))
		}
		if d.Rate < 0 {
			p.add(path+".demo.rate", "must be positive, got %g", d.Rate)
		}
		if d.Count < 0 {
			p.add(path+".demo.count", "must not be negative, got %d", d.Count)
		}
		if d.Keys < 0 {
			p.add(path+".demo.keys", "must be positive, got %d", d.Keys)
		}
	}
}
