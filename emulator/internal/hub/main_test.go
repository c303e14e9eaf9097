package hub

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind (the
// background goroutine must stop in Close; Next callers must return).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
