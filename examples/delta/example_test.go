// Package deltaexample holds the delta example: a connectors.yaml whose
// connector appends the emulator's demo orders to a Delta table, and its
// unit tests. This test runs them as `ehsink test` does.
package deltaexample

import (
	"context"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
	_ "github.com/ehsink/ehsink/sinks/delta"
)

func TestExample(t *testing.T) {
	var out strings.Builder
	noEnv := connector.LoadOptions{Getenv: func(string) string { return "" }}
	res, err := conntest.RunFiles(context.Background(), "connectors.yaml", noEnv, "connectors_test.yaml", &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 3 {
		t.Fatalf("result %+v, want 3 cases passed; report:\n%s", res, out.String())
	}
}
