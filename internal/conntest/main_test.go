package conntest

import (
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

// TestMain stops the shared PostgreSQL server (and Azurite) the tests
// started once they are done.
func TestMain(m *testing.M) { testenv.Main(m) }
