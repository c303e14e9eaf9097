package iceberg

// setHook makes every commit step of s call fn, which may fail the step.
func (s *sink) setHook(fn func(step string) error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.hook = fn
}
