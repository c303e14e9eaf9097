package connector

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/ehsink/ehsink/internal/testenv"
)

// TestMain fails the package when a test leaves a goroutine behind: Run and
// RunPartition must stop everything they start (emulator, demo producer,
// sources, runners) before they return. It stops the shared PostgreSQL
// server and Azurite the tests started, as testenv.Main does.
func TestMain(m *testing.M) {
	code := m.Run()
	testenv.StopSharedPostgres()
	testenv.StopSharedAzurite()
	if code == 0 {
		// The Event Hubs SDK keeps a CBS claim renewer per closed link until
		// its token's refresh time; it is the SDK's, not ours. Idle
		// keep-alive connections of the blob clients are the SDK
		// transport's.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/internal.(*Namespace).startNegotiateClaimRenewer.func3"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
