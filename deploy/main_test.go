package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// root is the repository root; binary is ehsink as the Dockerfile builds it
// (`make build-static`), built once by TestMain.
var root, binary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	var err error
	root, err = filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "ehsink-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "ehsink")
	build := exec.Command("make", "--no-print-directory", "-C", root, "build-static", "STATIC_BIN="+binary)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "make build-static:", err)
		return 1
	}
	return m.Run()
}
