package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// AzuriteAccountName and AzuriteAccountKey are Azurite's well-known
// development account (documented by Microsoft; not a secret).
const (
	AzuriteAccountName = "devstoreaccount1"
	AzuriteAccountKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// azuriteStartTimeout bounds how long a starting Azurite may take to listen.
// It is a readiness bound, not an assertion: node starts in well under a
// second on an idle machine, and a busy shared one gets ample room.
const azuriteStartTimeout = 60 * time.Second

// installHint is how a developer gets the tools.
const installHint = "run `make tools` (scripts/install-tools.sh) to install Azurite into .tools"

// AzuriteInstance is a running Azurite Blob service on a loopback port. It is
// safe for concurrent use.
type AzuriteInstance struct {
	port      int
	cmd       *exec.Cmd
	done      chan struct{} // closed when the process has exited and its output is drained
	stopOnce  sync.Once
	stderr    *tailBuffer
	container atomic.Int64 // counter for ContainerName
}

var shared struct {
	once sync.Once
	inst *AzuriteInstance
	err  error
}

// Azurite returns the Azurite instance shared by the whole test binary,
// starting it on first use; tests share it, so each test should use its own
// container ([AzuriteInstance.ContainerName]). The instance lives until
// [StopSharedAzurite] (call it from TestMain after m.Run) or until the test
// binary exits: the process is started with a parent-death signal, so it does
// not outlive the binary even without TestMain.
//
// When Azurite is not installed the test is skipped, or failed when CI=true,
// with the command that installs it. A failure to start fails the test.
func Azurite(t testing.TB) *AzuriteInstance {
	t.Helper()
	bin := azuriteBinary(t)
	shared.once.Do(func() { shared.inst, shared.err = startAzurite(bin) })
	if shared.err != nil {
		t.Fatalf("testenv: %v", shared.err)
	}
	return shared.inst
}

// NewAzurite starts an Azurite instance for t alone and stops it when t
// ends. Use it when a test stops the service or needs an empty account;
// otherwise [Azurite] is faster.
func NewAzurite(t testing.TB) *AzuriteInstance {
	t.Helper()
	bin := azuriteBinary(t)
	inst, err := startAzurite(bin)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(inst.Stop)
	return inst
}

// StopSharedAzurite stops the instance [Azurite] started, if any, and waits
// for it to exit. TestMain calls it after m.Run.
func StopSharedAzurite() {
	if shared.inst != nil {
		shared.inst.Stop()
	}
}

// Port is the Blob service's TCP port on 127.0.0.1.
func (a *AzuriteInstance) Port() int { return a.port }

// BlobEndpoint is the account's Blob endpoint URL (path-style, as Azurite
// expects): http://127.0.0.1:PORT/devstoreaccount1.
func (a *AzuriteInstance) BlobEndpoint() string {
	return fmt.Sprintf("http://127.0.0.1:%d/%s", a.port, AzuriteAccountName)
}

// ConnectionString is a storage connection string for the well-known
// development account on this instance.
func (a *AzuriteInstance) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		AzuriteAccountName, AzuriteAccountKey, a.BlobEndpoint())
}

var containerNameInvalid = regexp.MustCompile(`[^a-z0-9]+`)

// ContainerName returns a container name unique within this instance and
// derived from t's name, so that tests sharing the instance do not see each
// other's blobs. It does not create the container.
func (a *AzuriteInstance) ContainerName(t testing.TB) string {
	t.Helper()
	base := strings.Trim(containerNameInvalid.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	suffix := fmt.Sprintf("-%d", a.container.Add(1))
	if max := 63 - len(suffix); len(base) > max {
		base = strings.TrimRight(base[:max], "-")
	}
	if base == "" {
		base = "test"
	}
	return base + suffix
}

// Stop kills Azurite's process group and waits for it to exit. Azurite
// ignores SIGTERM and SIGINT, hence SIGKILL. Stop is idempotent.
func (a *AzuriteInstance) Stop() {
	a.stopOnce.Do(func() {
		_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
		<-a.done
	})
}

// azuriteBinary finds azurite-blob (or azurite) in <repo>/.tools, looking in
// the working directory and each parent, then on PATH. It skips or fails t
// when there is none.
func azuriteBinary(t testing.TB) string {
	t.Helper()
	if bin, err := findAzurite(); err == nil {
		return bin
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("testenv: Azurite not found (CI=true, so this is a failure): %s", installHint)
	}
	t.Skipf("testenv: Azurite not found, skipping: %s", installHint)
	return ""
}

func findAzurite() (string, error) {
	names := []string{"azurite-blob", "azurite"}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				for _, n := range names {
					p := filepath.Join(dir, ".tools", "node_modules", ".bin", n)
					if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
						return p, nil
					}
				}
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", errors.New("azurite not found")
}

var listeningRE = regexp.MustCompile(`Blob service (?:is )?successfully listen(?:s|ing) (?:on|at) https?://[^:]+:(\d+)`)

// startAzurite starts bin on a port the kernel picks (--blobPort 0) and
// returns once the port it prints accepts TCP connections.
func startAzurite(bin string) (*AzuriteInstance, error) {
	workdir, err := os.MkdirTemp("", "ehsink-azurite-")
	if err != nil {
		return nil, fmt.Errorf("azurite: %w", err)
	}
	args := []string{
		"--blobHost", "127.0.0.1", "--blobPort", "0",
		// The azblob SDK sends a service version newer than Azurite knows.
		"--skipApiVersionCheck",
		"--inMemoryPersistence", "--extentMemoryLimit", "512",
		"--silent", "--disableTelemetry",
	}
	if filepath.Base(bin) == "azurite" {
		// The all-services binary would otherwise take the fixed queue and
		// table ports and collide with another test binary.
		args = append(args, "--queueHost", "127.0.0.1", "--queuePort", "0", "--tableHost", "127.0.0.1", "--tablePort", "0")
	}

	inst := &AzuriteInstance{done: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	stdout, started := make(chan io.ReadCloser, 1), make(chan error, 1)
	// The process is started from a goroutine locked to its OS thread that
	// stays until the process exits: Pdeathsig fires when the thread that
	// forked the child ends, so this thread must outlive the child, and the
	// child must die with the test binary.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.Dir = workdir
		cmd.Stderr = inst.stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		if err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		inst.cmd = cmd
		started <- nil
		stdout <- out
		// Wait drains stdout's pipe: the reader below must be done first.
		<-inst.done
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(workdir)
		return nil, fmt.Errorf("azurite: start %s: %w", bin, err)
	}

	portc := make(chan int, 1)
	exited := make(chan struct{})
	go func() {
		defer close(inst.done)
		defer os.RemoveAll(workdir)
		out := <-stdout
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				var p int
				fmt.Sscan(m[1], &p)
				select {
				case portc <- p:
				default:
				}
			}
		}
		// Keep draining if the scanner gave up (a line over 64 KiB), so
		// Azurite never blocks on a full pipe.
		_, _ = io.Copy(io.Discard, out)
		_ = inst.cmd.Wait()
		close(exited)
	}()

	timeout := time.NewTimer(azuriteStartTimeout)
	defer timeout.Stop()
	select {
	case inst.port = <-portc:
	case <-exited:
		return nil, fmt.Errorf("azurite: %s exited before listening: %s", bin, inst.stderr.String())
	case <-timeout.C:
		inst.Stop()
		return nil, fmt.Errorf("azurite: %s did not report a port within %v: %s", bin, azuriteStartTimeout, inst.stderr.String())
	}
	if err := waitTCP(inst, exited, timeout.C); err != nil {
		inst.Stop()
		return nil, err
	}
	return inst, nil
}

// waitTCP polls the instance's port until it accepts a connection.
func waitTCP(inst *AzuriteInstance, exited <-chan struct{}, timeout <-chan time.Time) error {
	addr := fmt.Sprintf("127.0.0.1:%d", inst.port)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-tick.C:
		case <-exited:
			return fmt.Errorf("azurite: exited before accepting connections on %s: %s", addr, inst.stderr.String())
		case <-timeout:
			return fmt.Errorf("azurite: %s not accepting connections within %v: %w", addr, azuriteStartTimeout, err)
		}
	}
}

// tailBuffer keeps the last max bytes written, for error messages.
type tailBuffer struct {
	mu  sync.Mutex // guards buf
	buf []byte
	max int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = b.buf[len(b.buf)-b.max:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(bytes.TrimSpace(b.buf))
}
