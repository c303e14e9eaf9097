package cli

import (
	"runtime/debug"
	"testing"
)

// TestGCPercent: `ehsink run` sets GOGC=200 unless the environment sets
// GOGC, whose value then stays in force.
func TestGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return v
			}
			return ""
		}
	}
	if got := setGCPercent(env("")); got != defaultGCPercent || debug.SetGCPercent(100) != defaultGCPercent {
		t.Fatalf("without GOGC: target %d, want %d in force", got, defaultGCPercent)
	}
	debug.SetGCPercent(150) // what the runtime made of GOGC=150 at start
	if got := setGCPercent(env("150")); got != 150 || debug.SetGCPercent(100) != 150 {
		t.Fatalf("with GOGC=150: target %d, want 150 kept", got)
	}
}
