package connector

import (
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/ehsink/ehsink/internal/schemaregistry"
)

// The defaults written on the fields of spec.go, in one place.
const (
	defaultEmulatorListen     = "127.0.0.1:0"
	defaultEmulatorHub        = "orders"
	defaultEmulatorPartitions = 4
	defaultDemoRate           = 20
	defaultDemoKeys           = 50
	defaultCredential         = "default"
	defaultCheckpointDir      = ".ehsink/checkpoints"
	defaultCheckpointInterval = 20 * time.Second
	defaultInitialBackoff     = 200 * time.Millisecond
	defaultMaxBackoff         = 30 * time.Second
	defaultTolerance          = "all"
	defaultBreakerFailures    = 5
	defaultProbeInterval      = time.Second
	defaultMaxProbeInterval   = time.Minute
	defaultSinkTimeout        = 15 * time.Second
	defaultDeadLetterRoot     = ".ehsink/dead-letters"
	defaultHTTPListen         = "127.0.0.1:9464"
	defaultLagInterval        = 10 * time.Second
)

// DefaultDrainTimeout is Config.DrainTimeout when it is zero.
const DefaultDrainTimeout = 30 * time.Second

// withDefaults returns a copy of c with every zero field that has a
// documented default set to it. c is not modified; sink configs (already
// defaulted by their drivers' NewConfig) are shared, not copied.
func (c *Config) withDefaults() *Config {
	out := *c
	if out.DrainTimeout == 0 {
		out.DrainTimeout = DefaultDrainTimeout
	}
	if c.HTTP != nil {
		h := *c.HTTP
		if h.Listen == "" {
			h.Listen = defaultHTTPListen
		}
		if h.LagInterval == 0 {
			h.LagInterval = defaultLagInterval
		}
		out.HTTP = &h
	}
	if c.Emulator != nil {
		e := *c.Emulator
		if e.Listen == "" {
			e.Listen = defaultEmulatorListen
		}
		if len(e.Hubs) == 0 {
			e.Hubs = map[string]int{defaultEmulatorHub: defaultEmulatorPartitions}
		} else {
			e.Hubs = maps.Clone(e.Hubs)
		}
		if e.Demo != nil {
			d := *e.Demo
			if d.EventHub == "" {
				d.EventHub = slices.Sorted(maps.Keys(e.Hubs))[0]
			}
			if d.Rate == 0 {
				d.Rate = defaultDemoRate
			}
			if d.Keys == 0 {
				d.Keys = defaultDemoKeys
			}
			e.Demo = &d
		}
		out.Emulator = &e
	}
	if out.Emulator != nil && out.Emulator.SchemaRegistry == "" && slices.ContainsFunc(c.Connectors, readsEmulatorRegistry) {
		out.Emulator.SchemaRegistry = defaultEmulatorListen
	}
	out.Connectors = slices.Clone(c.Connectors)
	for i := range out.Connectors {
		out.Connectors[i].withDefaults()
	}
	return &out
}

// withDefaults fills in s's defaults in place; s is a copy owned by the caller.
func (s *Spec) withDefaults() {
	src := &s.Source
	if src.Namespace != "" && src.Credential == "" {
		src.Credential = defaultCredential
	}
	src.Settings = src.Settings.WithDefaults()
	if r := src.Registry; r != nil && r.CacheSize == 0 {
		c := *r
		c.CacheSize = schemaregistry.DefaultCacheSize
		src.Registry = &c
	}

	cp := &s.Checkpoint
	if cp.Blob != nil {
		b := *cp.Blob
		cp.Blob = &b
	}
	if cp.File != nil {
		f := *cp.File
		cp.File = &f
	}
	if cp.Blob == nil && cp.File == nil {
		cp.File = &FileCheckpointSpec{}
	}
	if cp.File != nil && cp.File.Dir == "" {
		cp.File.Dir = defaultCheckpointDir
	}
	if cp.EveryInterval == 0 {
		// A checkpoint is a billed Blob write (and a lease read) per
		// partition: one a second is 3,600 writes a partition-hour, ten
		// times what its lease renewals cost. The sink's watermark, not
		// the checkpoint, is where a partition resumes, so a later
		// checkpoint replays nothing; 20 s keeps it within KEDA's 30 s
		// polling. Under a short ownership expiration it is a third of
		// it: a replica whose sink is down reads other owners' advancing
		// checkpoints as evidence to hand its partitions over, within
		// 2 x the expiration (breaker.go).
		cp.EveryInterval = defaultCheckpointInterval
		if exp := src.LoadBalancing.OwnershipExpiration; exp > 0 {
			cp.EveryInterval = min(cp.EveryInterval, exp/3)
		}
	}

	e := &s.Errors
	if e.Retry.InitialBackoff == 0 {
		e.Retry.InitialBackoff = defaultInitialBackoff
	}
	if e.Retry.MaxBackoff == 0 {
		e.Retry.MaxBackoff = defaultMaxBackoff
	}
	if e.Tolerance == "" {
		e.Tolerance = defaultTolerance
	}
	e.CircuitBreaker = e.CircuitBreaker.withDefaults()
	if e.SinkTimeout == 0 {
		e.SinkTimeout = defaultSinkTimeoutFor(src.LoadBalancing.OwnershipExpiration)
	}
	if e.DeadLetter.Dir == "" && s.Name != "" {
		e.DeadLetter.Dir = filepath.Join(defaultDeadLetterRoot, s.Name)
	}
}

// defaultSinkTimeoutFor is errors.sink_timeout's default under an
// ownership expiration: 15s, or a quarter of the expiration when that is
// shorter. A replica notices a sink that stopped answering only when a
// call runs out of it, and its partitions stay unread from then until a
// healthy replica has claimed them; with 15s under a 10s expiration the
// detection alone would take most of the 2 × ownership_expiration a
// partition may go unread. A quarter is also what a commit may take
// before a lease that is not renewed runs out (checkLease).
func defaultSinkTimeoutFor(expiration time.Duration) time.Duration {
	if expiration > 0 {
		return min(defaultSinkTimeout, expiration/4)
	}
	return defaultSinkTimeout
}

// withDefaults returns b with its zero fields set to their defaults.
func (b CircuitBreakerSpec) withDefaults() CircuitBreakerSpec {
	if b.Failures == 0 {
		b.Failures = defaultBreakerFailures
	}
	if b.ProbeInterval == 0 {
		b.ProbeInterval = defaultProbeInterval
	}
	if b.MaxProbeInterval == 0 {
		b.MaxProbeInterval = defaultMaxProbeInterval
	}
	return b
}
