package checkpoint_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	code := m.Run()
	testenv.StopSharedAzurite()
	if code == 0 {
		// Idle keep-alive connections of the blob clients are the SDK
		// transport's, not goroutines these stores started.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
