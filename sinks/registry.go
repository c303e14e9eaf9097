package sinks

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps sink type names to drivers. It is safe for concurrent use.
//
// A nil *Registry is the process-wide registry that [Register] fills from
// the init functions of sink packages: it is what the ehsink command line
// (package cli) and the runner use when they are given no registry, and it
// can only be read through a nil *Registry, never registered into. A
// non-nil Registry (the zero value is empty and ready to use) is a registry
// of its own, for tests and for programs that run connectors with a chosen
// set of sinks.
type Registry struct {
	mu      sync.RWMutex // guards drivers
	drivers map[string]Driver
}

// global is the registry [Register] fills. It is the only mutable package
// state in ehsink, written only from init functions.
var global Registry

// Register makes a driver available to connectors under name. Call it from
// the init function of the sink's package, as database/sql drivers do:
//
//	func init() { sinks.Register("mysink", driver{}) }
//
// It panics if name is empty, d is nil, or name is already registered: these
// are programming errors.
func Register(name string, d Driver) { global.Register(name, d) }

// Register makes a driver available under name in r. It panics if name is
// empty, d is nil, name is already registered, or r is nil (the
// process-wide registry is filled by the package function [Register] only).
func (r *Registry) Register(name string, d Driver) {
	if r == nil {
		panic("sinks: Register on a nil *Registry (call sinks.Register from the sink package's init)")
	}
	if name == "" {
		panic("sinks: Register with an empty name")
	}
	if d == nil {
		panic("sinks: Register driver is nil for " + name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.drivers[name]; dup {
		panic("sinks: Register called twice for sink " + name)
	}
	if r.drivers == nil {
		r.drivers = make(map[string]Driver)
	}
	r.drivers[name] = d
}

// Lookup returns the driver registered under name; on a nil r, in the
// process-wide registry.
func (r *Registry) Lookup(name string) (Driver, error) {
	if r == nil {
		r = &global
	}
	r.mu.RLock()
	d, ok := r.drivers[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown sink %q (known: %v; forgotten import?)", name, r.Names())
	}
	return d, nil
}

// Names returns the registered names, sorted; on a nil r, those of the
// process-wide registry.
func (r *Registry) Names() []string {
	if r == nil {
		r = &global
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
