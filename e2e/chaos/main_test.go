package chaos_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

// binary is the ehsink executable built by TestMain.
var binary string

func TestMain(m *testing.M) {
	code := buildAndRun(m)
	testenv.StopSharedPostgres()
	testenv.StopSharedAzurite()
	os.Exit(code)
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ehsink-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "go env GOMOD:", err)
		return 1
	}
	binary = filepath.Join(dir, "ehsink")
	build := exec.Command("go", "build", "-o", binary, "./cmd/ehsink")
	build.Dir = filepath.Dir(strings.TrimSpace(string(out)))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ehsink:", err)
		return 1
	}
	return m.Run()
}
