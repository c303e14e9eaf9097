package cli

import (
	"bytes"
	"context"
	"fmt"
	"github.com/ehsink/ehsink/cli/devenv"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// cli runs ehsink in-process with args and returns its exit code, stdout
// and stderr.
func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = dispatch(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// dispatch runs a command as cmd/ehsink does: with the development
// environment.
func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Options{DevEnv: devenv.New()}.dispatch(ctx, args, stdout, stderr)
}

// writeConfig writes a config file into a temp dir and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "connectors.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const validConfig = `
emulator:
  hubs: {orders: 2}
connectors:
  - name: orders
    source:
      connection: emulator
      eventhub: orders
    checkpoint:
      file: {dir: ${STATE:-/tmp/ehsink-test-state}}
    sink: {type: stdout}
  - name: payments
    source:
      connection: ${EVENTHUB_CONNECTION}
    checkpoint:
      blob:
        connection: ${STORAGE_CONNECTION}
        container: checkpoints
    sink:
      type: parquet
      dir: /tmp/ehsink-test-parquet
      columns: {order_id: $.order_id, seq: "@sequence_number"}
  - name: orders-to-postgres
    source: {connection: emulator, eventhub: orders, consumer_group: pg}
    sink:
      type: postgres
      dsn: ${PG_DSN}
      table: orders
      columns: {order_id: $.order_id}
`

const (
	ehConn    = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=EHKEYSECRET;EntityPath=payments"
	storeConn = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=STORAGEKEY00;EndpointSuffix=core.windows.net"
	pgDSN     = "postgres://app:PGPASSWORD@db:5432/app?sslmode=disable"
)

func setSecrets(t *testing.T) {
	t.Helper()
	t.Setenv("EVENTHUB_CONNECTION", ehConn)
	t.Setenv("STORAGE_CONNECTION", storeConn)
	t.Setenv("PG_DSN", pgDSN)
}

func TestValidateOK(t *testing.T) {
	setSecrets(t)
	code, out, errOut := cli(t, "validate", "-c", writeConfig(t, validConfig))
	if code != exitOK || strings.TrimSpace(out) != "ok" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and ok", code, out, errOut)
	}
}

// TestFiveMistakes is the done-means of issue 2: a file with five different
// mistakes reports all five with their paths and exits 2, from validate and
// from run alike.
func TestFiveMistakes(t *testing.T) {
	path := writeConfig(t, `
emulator: {}
connectors:
  - name: orders
    source:
      connection: emulator
      batch: {max_evnts: 100}
    sink: {type: stdout}
  - name: payments
    source:
      connection: emulator
      eventhub: orders
      batch: {max_wait: 5 minutes}
    sink: {type: pg}
  - name: orders
    source: {connection: emulator, eventhub: orders}
    sink: {type: stdout}
`)
	want := []string{
		"connectors[0].source.batch.max_evnts: unknown key (did you mean max_events?)",
		"connectors[0].source.eventhub: required",
		`connectors[1].source.batch.max_wait: "5 minutes" is not a duration`,
		`connectors[1].sink.type: unknown sink "pg" (known: `,
		`connectors[2].name: duplicate connector name "orders"`,
	}
	wantProblems(t, path, want)
}

// wantProblems runs validate and run over the config at path: each exits
// 2, prints nothing on stdout, and reports exactly the problems of want
// (each a prefix of a problem line: its path and the start of its text).
func wantProblems(t *testing.T, path string, want []string) {
	t.Helper()
	for _, cmd := range []string{"validate", "run"} {
		t.Run(cmd, func(t *testing.T) {
			code, out, errOut := cli(t, cmd, "-c", path)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			for _, w := range want {
				if !strings.Contains(errOut, "  "+w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if n := fmt.Sprintf(": %d problems:", len(want)); !strings.Contains(errOut, n) {
				t.Errorf("stderr does not count %d problems:\n%s", len(want), errOut)
			}
		})
	}
}

func TestPrintRedacts(t *testing.T) {
	setSecrets(t)
	code, out, errOut := cli(t, "validate", "--print", "-c", writeConfig(t, validConfig))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, leak := range []string{"EHKEYSECRET", "STORAGEKEY", "PGPASSWORD", ehConn, storeConn, pgDSN} {
		if strings.Contains(out+errOut, leak) {
			t.Errorf("--print shows %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"connection: '***'", "connection: emulator", "dsn: '***'", "max_events: 2000", "drain_timeout: 30s", "type: parquet", "dir: /tmp/ehsink-test-state"} {
		if !strings.Contains(out, want) {
			t.Errorf("--print lacks %q:\n%s", want, out)
		}
	}
}

func TestErrorsRedact(t *testing.T) {
	setSecrets(t)
	// Secrets in places where they do not belong: the messages name the
	// problem, never the value.
	path := writeConfig(t, `
connectors:
  - name: a
    source:
      connection: ${PG_DSN}
      eventhub: x
      prefetch: ${EVENTHUB_CONNECTION}
      consumer_group: {dsn: ${PG_DSN}}
    checkpoint:
      blob: {connection: "${STORAGE_CONNECTION}", container: "${PG_DSN}"}
    sink: {type: stdout, format: "${PG_DSN}"}
  - name: b
    source: {connection: "${EVENTHUB_CONNECTION}"}
    sink: {type: postgres, dsn: "${PG_DSN}", table: "${PG_DSN}", mode: "${STORAGE_CONNECTION}"}
`)
	code, out, errOut := cli(t, "validate", "-c", path)
	if code != exitUsage {
		t.Fatalf("exit %d, want 2; stderr:\n%s", code, errOut)
	}
	for _, leak := range []string{"PGPASSWORD", "EHKEYSECRET", "STORAGEKEY"} {
		if strings.Contains(out+errOut, leak) {
			t.Errorf("output shows %q:\n%s", leak, errOut)
		}
	}
	for _, want := range []string{"connectors[0].source.connection:", "connectors[0].source.prefetch:", "connectors[0].source.consumer_group:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string // substring, "" for empty
		stderr string // substring, "" for empty
	}{
		{[]string{"--help"}, exitOK, "Commands:\n  run ", ""},
		{[]string{"help"}, exitOK, "validate", ""},
		{nil, exitUsage, "", "Usage: ehsink <command>"},
		{[]string{"frobnicate"}, exitUsage, "", `unknown command "frobnicate"`},
		{[]string{"valid"}, exitUsage, "", "did you mean validate?"},
		{[]string{"run", "--help"}, exitOK, "Usage: ehsink run [-c connectors.yaml] [--connector NAME]...", ""},
		{[]string{"help", "run"}, exitOK, "-log-format", ""},
		{[]string{"validate", "-h"}, exitOK, "-print", ""},
		{[]string{"version", "--help"}, exitOK, "Usage: ehsink version", ""},
		{[]string{"--help"}, exitOK, "  emulator ", ""},
		{[]string{"--help"}, exitOK, "  checkpoints ", ""},
		{[]string{"send", "--help"}, exitOK, "", ""},
		{[]string{"checkpoints", "--help"}, exitOK, "", ""},
		{[]string{"run", "--bogus"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{[]string{"validate", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"run", "--log-level", "loud", "-c", "x.yaml"}, exitUsage, "", `--log-level "loud"`},
		{[]string{"validate", "-c", "/nonexistent/connectors.yaml"}, exitUsage, "", "/nonexistent/connectors.yaml"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := cli(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d (stderr %q)", code, tt.code, errOut)
			}
			if tt.stdout != "" && !strings.Contains(out, tt.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.stdout, out)
			}
			if tt.stderr != "" && !strings.Contains(errOut, tt.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.stderr, errOut)
			}
		})
	}
}

func TestRunUnknownConnector(t *testing.T) {
	setSecrets(t)
	code, _, errOut := cli(t, "run", "-c", writeConfig(t, validConfig), "--connector", "orders,nope")
	if code != exitUsage || !strings.Contains(errOut, `--connector "nope": no such connector (connectors: orders, payments, orders-to-postgres)`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "version")
	if code != exitOK || !strings.Contains(out, "ehsink ") || !strings.Contains(out, runtime.Version()) || !strings.Contains(out, "commit ") ||
		!strings.Contains(out, "\nsinks delta, iceberg, parquet, postgres, stdout\n") {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	v := buildVersion("v1.2.3", "abc123")
	if v.version != "v1.2.3" || v.commit != "abc123" {
		t.Errorf("linker values not used: %+v", v)
	}
}

func TestSignalContext(t *testing.T) {
	exits := make(chan int, 1)
	var stderr bytes.Buffer
	ctx, stop := signalContext(context.Background(), &stderr, func(code int) { exits <- code })
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-ctx.Done() // the first signal cancels; a failure here is the test timeout
	select {
	case code := <-exits:
		t.Fatalf("exit(%d) after the first signal", code)
	default:
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := <-exits; code != exitFailure {
		t.Errorf("second signal: exit(%d), want %d", code, exitFailure)
	}
}

func TestSignalContextStop(t *testing.T) {
	ctx, stop := signalContext(context.Background(), &bytes.Buffer{}, func(int) { t.Error("exit called") })
	stop() // must return: the watcher goroutine ends
	if ctx.Err() == nil {
		t.Error("stop did not cancel the context")
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=abc+/=;EntityPath=x",
			"Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=***;EntityPath=x"},
		{"AccountName=a;AccountKey=Zm9v==;EndpointSuffix=core.windows.net", "AccountName=a;AccountKey=***;EndpointSuffix=core.windows.net"},
		{"GET https://a.blob.core.windows.net/c?sv=2020&sig=abc%2Bdef&se=1", "GET https://a.blob.core.windows.net/c?sv=2020&sig=***&se=1"},
		{"SharedAccessSignature sr=x&sig=SECRET&se=1&skn=k", "SharedAccessSignature sr=x&sig=***&se=1&skn=k"},
		{"dial postgres://app:hunter2@db:5432/app failed", "dial postgres://app:***@db:5432/app failed"},
		{"host=db user=app password=hunter2 dbname=app", "host=db user=app password=*** dbname=app"},
		{"Authorization: Bearer eyJhbGciOi.x.y", "Authorization: Bearer ***"},
		{"nothing secret at host:5432", "nothing secret at host:5432"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestRunStopsCleanly(t *testing.T) {
	// A run whose context is already cancelled (as by a signal) loads the
	// config, starts, drains and exits 0.
	dir := t.TempDir()
	path := writeConfig(t, `
emulator: {hubs: {orders: 1}}
connectors:
  - name: orders
    source: {connection: emulator, eventhub: orders}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    errors: {dead_letter: {dir: `+filepath.Join(dir, "dead")+`}}
    sink: {type: stdout, output: stderr}
`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out, errOut bytes.Buffer
	if code := dispatch(ctx, []string{"run", "-c", path, "--log-format", "json"}, &out, &errOut); code != exitOK {
		t.Errorf("exit %d, want 0; stderr:\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), `"msg":"starting"`) {
		t.Errorf("no JSON start log on stderr:\n%s", errOut.String())
	}
}

// TestShippedConfigValidates guards that the
// repository's connectors.yaml is valid as shipped.
func TestShippedConfigValidates(t *testing.T) {
	path := filepath.Join("..", "connectors.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the shipped config: %v", err)
	}
	code, out, errOut := cli(t, "validate", "-c", path)
	if code != exitOK || strings.TrimSpace(out) != "ok" {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
}

// TestRenamed: a custom binary's name replaces ehsink in usage texts, and
// the continuation lines of a usage line stay aligned under its flags.
func TestRenamed(t *testing.T) {
	in := "Usage: ehsink send [--a]\n                   [--b]\n\nRun 'ehsink send --help'.\n                   not a continuation\n"
	want := "Usage: ehsink-x send [--a]\n                     [--b]\n\nRun 'ehsink-x send --help'.\n                   not a continuation\n"
	if got := renamed(in, "ehsink-x"); got != want {
		t.Errorf("renamed:\n%s\nwant:\n%s", got, want)
	}
	if got := renamed(in, "ehsink"); got != in {
		t.Errorf("renamed for ehsink changed the text:\n%s", got)
	}
}
