package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/secret"
)

// TestRunFailsFast: `ehsink run` with a wrong setting exits 1 with one
// error naming the connector and the cause, rather than retrying forever
// (the process is killed at the deadline, which fails the test). An
// unreachable namespace is waited for like an outage, so its case bounds
// the retries with errors.retry.max_attempts.
func TestRunFailsFast(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	const key = "c2VjcmV0LWtleS12YWx1ZQ=="
	srv := emulatortest.Start(t, emulator.Config{
		Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}},
		Keys: map[string]secret.String{"app": key},
	})
	good := srv.ConnectionString("orders")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	fileStore := "file: {dir: ckpt}"
	tests := []struct {
		name, conn, group, store string
		says                     []string
	}{
		{"wrong key", strings.Replace(good, key, "d3Jvbmcta2V5", 1), "", fileStore, []string{"refused"}},
		{"unknown hub", strings.Replace(good, "EntityPath=orders", "EntityPath=invoices", 1), "", fileStore, []string{"invoices", "not found"}},
		{"missing consumer group", good, "billing", fileStore, []string{"consumer group", "billing", "not found"}},
		{"unreachable namespace", strings.Replace(good, srv.Addr(), closed, 1), "", fileStore, []string{"cannot reach"}},
		{"unreachable storage account", good, "", `blob: {connection: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=` + key + `;BlobEndpoint=http://` + closed + `/devstoreaccount1;", container: ckpt}`, []string{"checkpoint", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			group := ""
			if tt.group != "" {
				group = "\n      consumer_group: " + tt.group
			}
			cfg := filepath.Join(dir, "connectors.yaml")
			if err := os.WriteFile(cfg, []byte(`
connectors:
  - name: broken-one
    source:
      connection: "`+tt.conn+`"`+group+`
    checkpoint:
      `+tt.store+`
    sink:
      type: stdout
    errors: {retry: {initial_backoff: 10ms, max_backoff: 50ms, max_attempts: 3}}
`), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, binary, "run", "-c", cfg)
			cmd.Dir = dir
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || ctx.Err() != nil {
				t.Fatalf("ehsink run: %v (want exit 1)\n%s", err, stderr.String())
			}
			// the text log handler quotes the error, escaping its own quotes
			out := strings.ReplaceAll(stderr.String(), `\"`, `"`)
			t.Logf("stderr:\n%s", out)
			for _, s := range append([]string{`connector "broken-one"`}, tt.says...) {
				if !strings.Contains(out, s) {
					t.Errorf("stderr does not say %q", s)
				}
			}
			if strings.Contains(out, key) || strings.Contains(out, "d3Jvbmcta2V5") {
				t.Error("stderr shows a key")
			}
		})
	}
}
