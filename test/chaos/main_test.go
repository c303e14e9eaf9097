package chaos_test

import (
	"fmt"
	"os"
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
	if binary, _, err = testenv.BuildEhsink(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}
