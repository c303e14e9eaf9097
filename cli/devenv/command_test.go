package devenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func TestRunEmulatorServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runEmulator(ctx, []string{"--listen", "127.0.0.1:0", "--hub", "orders=3", "--hub", "pay=1", "--consumer-group", "audit", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the connection string: %v (stderr: %s)", err, stderr.String())
	}
	cs := strings.TrimSpace(line)
	if !strings.Contains(cs, "EntityPath=orders") || !strings.Contains(cs, "UseDevelopmentEmulator=true") {
		t.Fatalf("first line = %q", cs)
	}
	go io.Copy(io.Discard, pr)
	pc, err := azeventhubs.NewProducerClientFromConnectionString(cs, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	props, err := pc.GetEventHubProperties(rctx, nil)
	if err != nil || len(props.PartitionIDs) != 3 {
		t.Fatalf("GetEventHubProperties = %+v, %v", props, err)
	}
	pc.Close(rctx)
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit code %d, stderr: %s", c, stderr.String())
	}
}

func TestRunEmulatorUsage(t *testing.T) {
	for _, args := range [][]string{{"--hub", "orders"}, {"--hub", "orders=0"}, {"--key", "x"}, {"extra"}, {"--bogus"}, {"--fsync", "sometimes"},
		{"--key-rights", "nobody=listen"}, {"--key", "a=b", "--key-rights", "a=read"}, {"--key", "a=b", "--key-hub", "a"}, {"--tls-cert", "x.pem"},
		{"--schema-registry-basic-auth", "a:b"}, {"--schema-registry", "127.0.0.1:0", "--schema-registry-basic-auth", "nocolon"}} {
		var out, errOut bytes.Buffer
		if c := runEmulator(context.Background(), args, &out, &errOut); c != exitUsage {
			t.Errorf("runEmulator(%q) = %d, want %d", args, c, exitUsage)
		}
	}
	var out, errOut bytes.Buffer
	if c := runEmulator(context.Background(), []string{"--help"}, &out, &errOut); c != exitOK || !strings.Contains(errOut.String(), "--hub") {
		t.Errorf("--help = %d, output %q", c, errOut.String())
	}
}

// TestRunEmulatorTLS: --tls prints a TLS connection string per hub after
// the plain ones and writes the certificate to trust to --tls-cert-out;
// the SDK, dialling amqps:// with that certificate, gets through, with a
// --key-rights listen-only key too (reading properties needs no Send).
func TestRunEmulatorTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	certOut := filepath.Join(t.TempDir(), "ca.pem")
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runEmulator(ctx, []string{"--listen", "127.0.0.1:0", "--tls", "--tls-listen", "127.0.0.1:0", "--tls-cert-out", certOut,
			"--key", "reader=cmVhZA==", "--key-rights", "reader=listen", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	r := bufio.NewReader(pr)
	var lines []string
	for range 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the connection strings: %v (stderr: %s)", err, stderr.String())
		}
		lines = append(lines, strings.TrimSpace(line))
	}
	go io.Copy(io.Discard, r)
	tlsCS := lines[1]
	if strings.Contains(tlsCS, "UseDevelopmentEmulator") || !strings.Contains(tlsCS, "SharedAccessKeyName=reader") {
		t.Fatalf("second line = %q, want a TLS connection string", tlsCS)
	}
	pool := trustFile(t, certOut)
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(tlsCS, "", azeventhubs.DefaultConsumerGroup,
		&azeventhubs.ConsumerClientOptions{TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	props, err := cc.GetEventHubProperties(rctx, nil)
	if err != nil || len(props.PartitionIDs) != 4 {
		t.Fatalf("GetEventHubProperties over TLS = %+v, %v", props, err)
	}
	cc.Close(rctx)
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit code %d, stderr: %s", c, stderr.String())
	}
}

// TestRunEmulatorSchemaRegistry: --schema-registry serves the registries
// over HTTPS with the certificate written to --tls-cert-out, and
// --schema-registry-basic-auth guards the Confluent routes. (Tokens on the
// Azure routes are the emulator's tests'.)
func TestRunEmulatorSchemaRegistry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A port that was free a moment ago: the command prints the registry's
	// address only in its logs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	certOut := filepath.Join(t.TempDir(), "ca.pem")
	pr, pw := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runEmulator(ctx, []string{"--listen", "127.0.0.1:0", "--schema-registry", addr, "--tls-cert-out", certOut,
			"--schema-registry-basic-auth", "kafka:pw", "--log-level", "error"}, pw, &stderr)
		pw.Close()
	}()
	r := bufio.NewReader(pr)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatalf("reading the connection string: %v (stderr: %s)", err, stderr.String())
	}
	go io.Copy(io.Discard, r)
	pool := trustFile(t, certOut)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: time.Minute}
	do := func(req *http.Request) int {
		t.Helper()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	req, _ := http.NewRequest("PUT", "https://"+addr+"/$schemaGroups/g/schemas/R?api-version=2023-07-01",
		strings.NewReader(`{"type":"record","name":"R","fields":[]}`))
	req.Header.Set("Content-Type", "application/json; serialization=Avro")
	if got := do(req); got != http.StatusNoContent {
		t.Fatalf("register: %d, want 204", got)
	}
	req, _ = http.NewRequest("GET", "https://"+addr+"/subjects", nil)
	if got := do(req); got != http.StatusUnauthorized {
		t.Fatalf("confluent without basic auth: %d, want 401", got)
	}
	req.SetBasicAuth("kafka", "pw")
	if got := do(req); got != http.StatusOK {
		t.Fatalf("confluent with basic auth: %d, want 200", got)
	}
	cancel()
	if c := <-code; c != exitOK {
		t.Fatalf("exit code %d, stderr: %s", c, stderr.String())
	}
}

// trustFile returns a pool holding the certificate in the PEM file.
func trustFile(t *testing.T, path string) *x509.CertPool {
	t.Helper()
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatalf("%s holds no certificate", path)
	}
	return pool
}
