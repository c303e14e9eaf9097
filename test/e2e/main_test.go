package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

// binary is the ehsink executable built by TestMain, from the module at root.
var binary, root string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "ehsink-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if binary, root, err = testenv.BuildEhsink(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
