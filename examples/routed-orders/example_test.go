// Package routedorders holds the routed-orders example: a connectors.yaml
// whose PostgreSQL connector writes two tables by event type, and its unit
// tests. This test runs them as `ehsink test` does.
package routedorders

import (
	"context"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
	_ "github.com/ehsink/ehsink/sinks/postgres"
)

func TestExample(t *testing.T) {
	var out strings.Builder
	noEnv := connector.LoadOptions{Getenv: func(string) string { return "" }}
	res, err := conntest.RunFiles(context.Background(), "connectors.yaml", noEnv, "connectors_test.yaml", &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 5 {
		t.Fatalf("result %+v, want 5 cases passed; report:\n%s", res, out.String())
	}
}
