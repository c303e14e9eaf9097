package routing

import (
	"errors"
	"fmt"

	"github.com/ehsink/ehsink/sinks"
)

// ErrNoRoute is wrapped by the error of an event that no route takes.
var ErrNoRoute = errors.New("no route takes the event")

// Cond is a compiled route condition: it reports whether the event takes
// the route. An error is an error of the event.
type Cond func(ev *sinks.Event) (bool, error)

// Selector picks the route of each event: the first whose condition holds,
// or whose condition is nil (the default). It is immutable and safe for
// concurrent use.
type Selector struct {
	conds []Cond
	names []string
}

// NewSelector returns the selector of routes with the given conditions
// (nil: the default route) and names (for error messages), in order.
func NewSelector(conds []Cond, names []string) *Selector {
	return &Selector{conds: conds, names: names}
}

// Select returns the index of ev's route. An event that no route takes
// returns an error wrapping ErrNoRoute; a condition that fails on the
// event returns its error, naming the route.
func (s *Selector) Select(ev *sinks.Event) (int, error) {
	for i, c := range s.conds {
		if c == nil {
			return i, nil
		}
		ok, err := c(ev)
		if err != nil {
			return -1, fmt.Errorf("route %s: when: %w", s.names[i], err)
		}
		if ok {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w (no condition holds and there is no route without when)", ErrNoRoute)
}

// WhenChecker checks the `when:` conditions of a list of routes, given in
// order: each must compile, and no route may follow the default (a route
// without when takes every event, so a later one is never reached). Its
// zero value is ready; use one per list.
type WhenChecker struct {
	seen      bool
	defaultAt int
}

// Check checks route i's condition; the error is the `when` field's.
func (c *WhenChecker) Check(i int, when string) error {
	if c.seen {
		return fmt.Errorf("never reached: routes[%d] has no when and takes every event first", c.defaultAt)
	}
	if when == "" {
		c.seen, c.defaultAt = true, i
		return nil
	}
	_, err := CompileCondition(when)
	return err
}
