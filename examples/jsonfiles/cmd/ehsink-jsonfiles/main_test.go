package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
)

// buildBinary builds this command into a temporary directory: the tests
// run the binary a user would build, not the cli package in-process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "ehsink-jsonfiles")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestBinaryCommands builds ehsink-jsonfiles and runs the commands a custom
// binary gets from package cli: validate, checkpoints list (on a file
// checkpoint store), run --http (probed on /healthz, stopped by SIGINT)
// and version. The emulator runs in the test process and the binary
// reaches it by connection string, as it would reach Event Hubs.
func TestBinaryCommands(t *testing.T) {
	bin := buildBinary(t)
	emu := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "connectors.yaml")
	text := fmt.Sprintf(`
connectors:
  - name: orders-to-jsonfiles
    source:
      connection: ${EVENTHUB_CONNECTION}
      load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 10s}
    checkpoint:
      file: {dir: %s}
    sink:
      type: jsonfiles
      dir: %s
`, filepath.Join(dir, "checkpoints"), filepath.Join(dir, "out"))
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "EVENTHUB_CONNECTION="+emu.ConnectionString("orders"))
	command := func(args ...string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), bin, args...)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String(), errOut.String()
		} else if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return 0, out.String(), errOut.String()
	}

	if code, out, errOut := command("validate", "-c", cfg); code != 0 || strings.TrimSpace(out) != "ok" {
		t.Fatalf("validate: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := command("validate", "-c", filepath.Join(dir, "missing.yaml")); code != 2 {
		t.Errorf("validate of a missing file: exit %d, want 2; stderr:\n%s", code, errOut)
	}
	code, out, errOut := command("checkpoints", "list", "-c", cfg)
	if code != 0 || !strings.Contains(out, "PARTITION") || strings.Count(out, "\n") < 3 {
		t.Errorf("checkpoints list: exit %d, want 0 and a table of 2 partitions; stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	code, out, errOut = command("version")
	if code != 0 || !strings.HasPrefix(out, "ehsink-jsonfiles ") || !strings.Contains(out, "commit ") || !strings.Contains(out, "\nsinks jsonfiles, stdout\n") {
		t.Errorf("version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The binary calls itself by its own name in --help and in each
	// command's usage and errors.
	code, out, _ = command("--help")
	if code != 0 || !strings.Contains(out, "Usage: ehsink-jsonfiles <command>") || strings.Contains(out, "Usage: ehsink ") {
		t.Errorf("--help: exit %d, stdout:\n%s", code, out)
	}
	code, out, _ = command("send", "--help")
	if code != 0 || !strings.HasPrefix(out, "Usage: ehsink-jsonfiles send ") {
		t.Errorf("send --help: exit %d, stdout:\n%s", code, out)
	}
	if code, _, errOut := command("validate", "--bogus"); code != 2 || !strings.HasPrefix(errOut, "ehsink-jsonfiles validate: flag provided but not defined") {
		t.Errorf("validate --bogus: exit %d, stderr:\n%s", code, errOut)
	}

	// run --http: /healthz answers while it runs; SIGINT stops it with 0.
	addr := freeAddr(t)
	run := exec.Command(bin, "run", "-c", cfg, "--http", addr)
	run.Env = env
	stderr, err := run.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	exited := make(chan error, 1)
	go func() { <-logsDone; exited <- run.Wait() }()
	healthy := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline) && !healthy; {
		select {
		case err := <-exited:
			t.Fatalf("run exited before /healthz answered: %v\n%s", err, logs.String())
		case <-time.After(100 * time.Millisecond):
		}
		healthy = get(t.Context(), "http://"+addr+"/healthz") == http.StatusOK
	}
	if !healthy {
		_ = run.Process.Kill()
		<-exited
		t.Fatalf("/healthz never answered 200; logs:\n%s", logs.String())
	}
	if err := run.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("run after SIGINT: %v, want exit 0; logs:\n%s", err, logs.String())
		}
	case <-time.After(60 * time.Second):
		_ = run.Process.Kill()
		<-exited
		t.Fatalf("run did not stop after SIGINT; logs:\n%s", logs.String())
	}
}

// TestConfigTest runs `ehsink-jsonfiles test` over the example's
// connectors.yaml and connectors_test.yaml, as CI does: the mapping is
// checked with no event hub, so EVENTHUB_CONNECTION is not set.
func TestConfigTest(t *testing.T) {
	bin := buildBinary(t)
	cmd := exec.CommandContext(t.Context(), bin, "test", "-c", filepath.Join("..", "..", "connectors.yaml"))
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "EVENTHUB_CONNECTION=") })
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 cases passed") {
		t.Fatalf("ehsink-jsonfiles test: %v\n%s", err, out)
	}
}

// TestNoEmulatorLinked: a binary that does not set cli.Options.DevEnv does
// not link the emulator, and says what to do with a config that needs it.
func TestNoEmulatorLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for pkg := range strings.FieldsSeq(string(out)) {
		if pkg == "github.com/ehsink/ehsink/emulator" || strings.HasPrefix(pkg, "github.com/ehsink/ehsink/emulator/") || pkg == "github.com/ehsink/ehsink/cli/devenv" {
			t.Errorf("ehsink-jsonfiles links %s", pkg)
		}
	}
	if !strings.Contains(string(out), "github.com/ehsink/ehsink/cli\n") {
		t.Fatalf("go list -deps does not list the cli package:\n%s", out)
	}

	bin := buildBinary(t)
	cfg := filepath.Join(t.TempDir(), "connectors.yaml")
	text := `
emulator: {hubs: {orders: 1}}
connectors:
  - name: a
    source: {connection: emulator, eventhub: orders}
    sink: {type: stdout}
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"validate", "-c", cfg}, {"run", "-c", cfg}, {"emulator"}} {
		cmd := exec.CommandContext(t.Context(), bin, args...)
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(errOut.String(), "github.com/ehsink/ehsink/cli/devenv") {
			t.Errorf("%s: %v, want exit 2 naming the devenv package; stderr:\n%s", strings.Join(args, " "), err, errOut.String())
		}
	}
}

// get returns the status code of a GET of url, or 0 when it fails.
func get(ctx context.Context, url string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}
