package emulator

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: every
// server goroutine must be stopped by Shutdown. The SDK keeps a few
// process-wide goroutines, which are ignored by name.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// The SDK's token renewers outlive Close until their timer fires.
		goleak.IgnoreAnyFunction("github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/internal.(*Namespace).startNegotiateClaimRenewer.func1"),
		goleak.IgnoreAnyFunction("github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/internal.(*Namespace).startNegotiateClaimRenewer.func3"),
	)
}
