package routing

import (
	"fmt"
	"time"
)

// RetryUnwritableAfter is how long a table a templated route named, found
// unwritable (columns that do not fit, no such table), keeps its events
// dead letters before the sink looks at it again. The sinks share it so
// that the docs state one figure.
const RetryUnwritableAfter = time.Minute

// Owners says which route writes each destination of a connector: a
// route's literal destination from the start, a templated route's
// destinations as events name them, at most a bound of them per route.
// One destination has one column mapping, so a destination that a second
// route names is an error of the event. The running sink and `ehsink
// test` (the Render of a TableShape) ask the same questions of it. It is
// not safe for concurrent use.
type Owners struct {
	names []string       // route names, by index
	max   []int          // max_tables, by route index
	owner map[string]int // destination → the index of the route that writes it
	count []int          // destinations each route has named so far
}

// NewOwners returns the owners of routes with the given names, bounds of
// destinations and literal destinations ("" for a templated route), by
// route index. A literal destination two routes give is the first one's.
func NewOwners(names []string, max []int, literal []string) *Owners {
	o := &Owners{names: names, max: max, owner: map[string]int{}, count: make([]int, len(names))}
	for i, d := range literal {
		if _, dup := o.owner[d]; d != "" && !dup {
			o.owner[d] = i
		}
	}
	return o
}

// Check returns why route i may not write dest, an error of the event
// that named it; nil when it may.
func (o *Owners) Check(i int, dest string) error {
	if j, ok := o.owner[dest]; ok {
		if j != i {
			return fmt.Errorf("route %s: table %s is written by route %s (one table, one column mapping)", o.names[i], dest, o.names[j])
		}
		return nil
	}
	if o.count[i] >= o.max[i] {
		return fmt.Errorf("route %s: table %s would be table %d of the route, past max_tables %d", o.names[i], dest, o.count[i]+1, o.max[i])
	}
	return nil
}

// Add records that route i writes dest, which Check allowed.
func (o *Owners) Add(i int, dest string) {
	if _, ok := o.owner[dest]; !ok {
		o.owner[dest] = i
		o.count[i]++
	}
}
