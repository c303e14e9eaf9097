package ops_test

import (
	"testing"

	"github.com/ehsink/ehsink/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
