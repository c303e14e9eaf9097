package iceberg

import "time"

// setHook makes every commit step of s call fn, which may fail the step.
func (s *sink) setHook(fn func(step string) error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.hook = fn
}

// setClock replaces the sink's clock (max_age, maintenance.every).
func (s *sink) setClock(now func() time.Time) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.now = now
}
