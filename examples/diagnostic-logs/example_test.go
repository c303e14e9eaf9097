// Package diagnosticlogs holds the diagnostic-logs example: a
// connectors.yaml whose Parquet connector makes one row per record of Azure
// platform-log events, and its unit tests. This test runs them as `ehsink
// test` does.
package diagnosticlogs

import (
	"context"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/conntest"
	_ "github.com/ehsink/ehsink/sinks/parquet"
)

func TestExample(t *testing.T) {
	var out strings.Builder
	noEnv := connector.LoadOptions{Getenv: func(string) string { return "" }}
	res, err := conntest.RunFiles(context.Background(), "connectors.yaml", noEnv, "connectors_test.yaml", &out)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed != 0 || res.Cases != 4 {
		t.Fatalf("result %+v, want 4 cases passed; report:\n%s", res, out.String())
	}
}
