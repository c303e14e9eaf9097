package cli

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/connector"
)

func TestMetricsEndpoints(t *testing.T) {
	var logs strings.Builder
	_, stop, err := opsServer("127.0.0.1:0", nil, connector.NewControl(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The address is in the log line; read it from there as a user would.
	line := logs.String()
	i := strings.Index(line, "http://")
	if i < 0 {
		t.Fatalf("no address logged: %q", line)
	}
	base := strings.Trim(strings.Fields(line[i:])[0], `"`)
	for path, want := range map[string]string{"/metrics": "go_goroutines", "/healthz": "ok"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d %q, want 200 containing %q", path, resp.StatusCode, body[:min(len(body), 200)], want)
		}
	}
}
