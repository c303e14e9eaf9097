//go:build race

package expr

// raceEnabled: the race detector makes sync.Pool drop some of what is put
// back, so a pooled evaluation may allocate now and then.
const raceEnabled = true
