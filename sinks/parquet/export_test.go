package parquet

import "time"

// setClock replaces the sink's clock, which dates a file's first event for
// max_age.
func (s *sink) setClock(now func() time.Time) { s.now = now }

// wrapStore lets a test put a fault-injecting store in front of the real one.
func (s *sink) wrapStore(wrap func(store) store) { s.store = wrap(s.store) }

// traceSteps has a local store report every step of its commits.
func (s *sink) traceSteps(fn func(step, path string)) { s.store.(*localStore).trace = fn }

// setFS makes the local store use f for every file operation.
func (s *sink) setFS(f localFS) { s.store.(*localStore).fs = f }
