package iceberg

import (
	"time"

	"github.com/apache/iceberg-go/table"
)

// setHook makes every commit step of s call fn, which may fail the step.
func (s *sink) setHook(fn func(step string) error) {
	defer s.lockAll()()
	s.hook = fn
}

// setClock replaces the sink's clock (max_age, maintenance.every).
func (s *sink) setClock(now func() time.Time) {
	defer s.lockAll()()
	s.now = now
}

// lockAll locks every table's mutex (the commits read the hook and the
// clock under them) and returns the unlock.
func (s *sink) lockAll() func() {
	for _, d := range s.dests {
		d.mu.Lock()
	}
	return func() {
		for _, d := range s.dests {
			d.mu.Unlock()
		}
	}
}

// current returns the newest metadata of the sink's first table.
func (s *sink) current() *table.Table { return s.dests[0].current() }
