// Package backoff is ehsink's one exponential backoff: the runner's sink
// and checkpoint retries, the circuit breaker's probes, the connector's
// waits for a service at start and the source's processor restarts all
// step through it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff doubles a wait from Initial up to Max. Set Initial and Max; a
// Max below Initial is raised to Initial. A Backoff is used by one
// goroutine at a time.
type Backoff struct {
	// Initial is the first wait.
	Initial time.Duration
	// Max bounds every wait.
	Max time.Duration

	next time.Duration // the wait Next returns; zero: Initial
}

// Next returns the wait before the next attempt: Initial, then twice the
// previous wait, at most Max.
func (b *Backoff) Next() time.Duration {
	d := b.Peek()
	b.next = min(2*d, max(b.Max, b.Initial))
	return d
}

// Jittered returns Next with full jitter, a uniform random wait in
// [0, Next()]: retries of many partitions against one sink then do not
// arrive in step.
func (b *Backoff) Jittered() time.Duration {
	return time.Duration(rand.Int64N(int64(b.Next()) + 1))
}

// Peek returns the wait Next would return, without stepping.
func (b *Backoff) Peek() time.Duration {
	if b.next == 0 {
		return min(b.Initial, max(b.Max, b.Initial))
	}
	return b.next
}

// Reset starts again from Initial (after a success).
func (b *Backoff) Reset() { b.next = 0 }
