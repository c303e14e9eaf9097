package checkpoint_test

import (
	"os"
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	code := m.Run()
	testenv.StopSharedAzurite()
	os.Exit(code)
}
