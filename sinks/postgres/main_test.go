package postgres

import (
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

// TestMain stops the shared PostgreSQL server after the tests.
func TestMain(m *testing.M) { testenv.Main(m) }
