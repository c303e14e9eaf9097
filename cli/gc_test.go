package cli

import (
	"math"
	"os"
	"path/filepath"
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

// TestMemoryLimit: a container's memory.max sets the soft limit to 90 %
// of it, unless GOMEMLIMIT is set or there is no limit.
func TestMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	dir := t.TempDir()
	file := func(text string) string {
		p := filepath.Join(dir, "memory.max")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	none := func(string) string { return "" }
	if got := setMemoryLimit(none, file("536870912\n")); got != 483183819 || debug.SetMemoryLimit(-1) != got {
		t.Fatalf("512 MiB container: limit %d, want 483183819 in force", got)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got := setMemoryLimit(none, file("max\n")); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("no container limit: limit %d set", got)
	}
	if got := setMemoryLimit(func(string) string { return "1GiB" }, file("536870912\n")); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT set: limit %d set over it", got)
	}
	if got := setMemoryLimit(none, filepath.Join(dir, "absent")); got != 0 {
		t.Fatalf("no cgroup file: limit %d", got)
	}
}
