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
// second on an idle machine, but a shared 2-core machine running every
// package's tests at once has been seen to need more than a minute.
const azuriteStartTimeout = 3 * time.Minute

// installHint is how a developer gets the tools.
const installHint = "run `make tools` (test/scripts/install-tools.sh) to install Azurite into .tools"

// AzuriteInstance is a running Azurite Blob service on a loopback port. It is
// safe for concurrent use.
type AzuriteInstance struct {
	bin       string
	location  string // data directory ("" = memory only)
	tlsDir    string // holds cert.pem and key.pem of an HTTPS instance that checks tokens ("" = http)
	port      int
	container atomic.Int64 // counter for ContainerName
	mu        sync.Mutex   // guards proc
	proc      *azuriteProc // the current process; stopped ones are not restarted
}

// azuriteProc is one Azurite process of an instance.
type azuriteProc struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited and its output is drained
	stopOnce sync.Once
	stderr   *tailBuffer
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

// NewPersistentAzurite starts an Azurite instance for t alone that keeps its
// data in dir (Azurite's --location), so that [AzuriteInstance.Start] after
// [AzuriteInstance.Stop] serves the same account again on the same port: an
// outage of the storage service rather than its loss. Azurite saves its
// metadata every few seconds, so a Stop (SIGKILL) can forget the writes of
// the last seconds; it saves the blobs' index and the index of their bytes
// on separate timers, so a blob with content written in those seconds may
// come back listed but answering 500 to every read. The instance is
// stopped when t ends; dir is not removed.
func NewPersistentAzurite(t testing.TB, dir string) *AzuriteInstance {
	t.Helper()
	inst := &AzuriteInstance{bin: azuriteBinary(t), location: dir}
	if err := inst.Start(); err != nil {
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
func (a *AzuriteInstance) Port() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.port
}

// BlobEndpoint is the account's Blob endpoint URL (path-style, as Azurite
// expects): http://127.0.0.1:PORT/devstoreaccount1.
func (a *AzuriteInstance) BlobEndpoint() string {
	scheme := "http"
	if a.tlsDir != "" {
		scheme = "https"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d/%s", scheme, a.Port(), AzuriteAccountName)
}

// ConnectionString is a storage connection string for the well-known
// development account on this instance.
func (a *AzuriteInstance) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=%s;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		strings.SplitN(a.BlobEndpoint(), ":", 2)[0], AzuriteAccountName, AzuriteAccountKey, a.BlobEndpoint())
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
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		p.stop()
	}
}

// Start starts a stopped instance again, on the same port and, for a
// persistent instance, with the same data; an in-memory instance comes
// back empty. It returns once the port accepts connections, and does
// nothing if the instance runs.
func (a *AzuriteInstance) Start() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.proc != nil {
		select {
		case <-a.proc.done:
		default:
			return nil
		}
	}
	p, port, err := startAzuriteProc(a.bin, a.port, a.location, a.tlsDir)
	if err != nil {
		return err
	}
	a.proc, a.port = p, port
	return nil
}

func (p *azuriteProc) stop() {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
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

// startAzurite starts bin on a port the kernel picks, in memory.
func startAzurite(bin string) (*AzuriteInstance, error) {
	inst := &AzuriteInstance{bin: bin}
	if err := inst.Start(); err != nil {
		return nil, err
	}
	return inst, nil
}

// azuriteArgs are the flags Azurite runs with: blob only on port (0: any
// free one), in memory unless location is set, over HTTPS with tokens
// checked when tlsDir is set.
func azuriteArgs(bin string, port int, location, tlsDir string) []string {
	args := []string{
		"--blobHost", "127.0.0.1", "--blobPort", fmt.Sprint(port),
		// The azblob SDK sends a service version newer than Azurite knows.
		"--skipApiVersionCheck",
		// The Python SDK's Blob checkpoint store (azure-eventhub-
		// checkpointstoreblob 1.2) sends x-ms-encryption-algorithm, which
		// strict mode refuses with FeatureNotSupported.
		"--loose",
		"--silent", "--disableTelemetry",
	}
	if location == "" {
		args = append(args, "--inMemoryPersistence", "--extentMemoryLimit", "512")
	} else {
		args = append(args, "--location", location)
	}
	if tlsDir != "" {
		args = append(args, "--oauth", "basic", "--cert", filepath.Join(tlsDir, "cert.pem"), "--key", filepath.Join(tlsDir, "key.pem"))
	}
	if filepath.Base(bin) == "azurite" {
		// The all-services binary would otherwise take the fixed queue and
		// table ports and collide with another test binary.
		args = append(args, "--queueHost", "127.0.0.1", "--queuePort", "0", "--tableHost", "127.0.0.1", "--tablePort", "0")
	}
	return args
}

// startAzuriteProc starts bin on port (0: the kernel picks one, and
// Azurite prints it), keeping data in location ("" = memory only), over
// HTTPS with the certificate in tlsDir if set, and returns once the port
// accepts TCP connections.
func startAzuriteProc(bin string, port int, location, tlsDir string) (*azuriteProc, int, error) {
	workdir, err := os.MkdirTemp("", "ehsink-azurite-")
	if err != nil {
		return nil, 0, fmt.Errorf("azurite: %w", err)
	}
	args := azuriteArgs(bin, port, location, tlsDir)

	proc := &azuriteProc{done: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	stdout, started := make(chan io.ReadCloser, 1), make(chan error, 1)
	// The process is started from a goroutine locked to its OS thread that
	// stays until the process exits: Pdeathsig fires when the thread that
	// forked the child ends, so this thread must outlive the child, and the
	// child must die with the test binary.
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(bin, args...)
		cmd.Dir = workdir
		cmd.Stderr = proc.stderr
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
		proc.cmd = cmd
		started <- nil
		stdout <- out
		// Wait drains stdout's pipe: the reader below must be done first.
		<-proc.done
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		_ = os.RemoveAll(workdir)
		return nil, 0, fmt.Errorf("azurite: start %s: %w", bin, err)
	}

	portc := make(chan int, 1)
	exited := make(chan struct{})
	go proc.watch(<-stdout, workdir, portc, exited)

	timeout := time.NewTimer(azuriteStartTimeout)
	defer timeout.Stop()
	select {
	case port = <-portc:
	case <-exited:
		return nil, 0, fmt.Errorf("azurite: %s exited before listening: %s", bin, proc.stderr.String())
	case <-timeout.C:
		proc.stop()
		return nil, 0, fmt.Errorf("azurite: %s did not report a port within %v: %s", bin, azuriteStartTimeout, proc.stderr.String())
	}
	if err := waitTCP(port, proc, exited, timeout.C); err != nil {
		proc.stop()
		return nil, 0, err
	}
	return proc, port, nil
}

// watch reads Azurite's stdout for the port it listens on (sent on portc),
// then waits for the process, closes exited and removes workdir.
func (proc *azuriteProc) watch(out io.ReadCloser, workdir string, portc chan<- int, exited chan<- struct{}) {
	defer close(proc.done)
	defer os.RemoveAll(workdir)
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
	_ = proc.cmd.Wait()
	close(exited)
}

// waitTCP polls port until it accepts a connection.
func waitTCP(port int, proc *azuriteProc, exited <-chan struct{}, timeout <-chan time.Time) error {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
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
			return fmt.Errorf("azurite: exited before accepting connections on %s: %s", addr, proc.stderr.String())
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
