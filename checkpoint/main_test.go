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
		// transport's, not goroutines these stores started. The Event Hubs
		// SDK leaves a CBS claim renewer per closed partition link until the
		// token's refresh time (minutes); it is the SDK's, not ours.
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/internal.(*Namespace).startNegotiateClaimRenewer.func3")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
