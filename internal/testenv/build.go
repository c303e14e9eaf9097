package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BuildEhsink builds ./cmd/ehsink of the enclosing module into dir and
// returns the binary's path and the module root, for tests that run ehsink
// as its own process. Build output goes to stderr.
func BuildEhsink(dir string) (binary, root string, err error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root = filepath.Dir(strings.TrimSpace(string(out)))
	binary = filepath.Join(dir, "ehsink")
	build := exec.Command("go", "build", "-o", binary, "./cmd/ehsink")
	build.Dir = root
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", "", fmt.Errorf("building ehsink: %w", err)
	}
	return binary, root, nil
}
