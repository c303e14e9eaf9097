package delta

// setHook arms the test hook that runs at each step of a commit.
func (s *sink) setHook(h func(step string) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}
