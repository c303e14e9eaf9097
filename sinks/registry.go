package sinks

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps sink type names to drivers. The zero value is empty and ready
// to use; it is safe for concurrent use. Tests build their own Registry
// instead of changing the global one.
type Registry struct {
	mu      sync.RWMutex // guards drivers
	drivers map[string]Driver
}

// Register makes a driver available under name. It panics if name is empty,
// d is nil, or name is already registered: these are programming errors.
func (r *Registry) Register(name string, d Driver) {
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

// Lookup returns the driver registered under name.
func (r *Registry) Lookup(name string) (Driver, error) {
	r.mu.RLock()
	d, ok := r.drivers[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown sink %q (known: %v; forgotten import?)", name, r.Names())
	}
	return d, nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.drivers))
	for n := range r.drivers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// global is the registry sink packages register into from init. It is the
// only mutable package state in ehsink.
var global Registry

// Register makes a driver available to connectors under name, in the global
// registry. Call it from the init function of the sink's package.
func Register(name string, d Driver) { global.Register(name, d) }

// Lookup returns the globally registered driver for name.
func Lookup(name string) (Driver, error) { return global.Lookup(name) }

// Names returns the globally registered sink names, sorted.
func Names() []string { return global.Names() }

// Default returns the global registry, for code that takes a *Registry.
func Default() *Registry { return &global }
