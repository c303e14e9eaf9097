package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one OS process of the run, with its stderr in a log file.
type proc struct {
	name     string
	cmd      *exec.Cmd
	done     chan struct{} // closed when the process has exited
	err      error         // Wait's result, once done is closed
	expected chan struct{} // closed when the harness signalled it, so an exit is no surprise
	once     sync.Once
	started  time.Time
}

// startProc starts binary with args; onLine sees every stderr line.
func startProc(name, dir, logPath string, args []string, onLine func(string)) (*proc, *bufio.Scanner, error) {
	p := &proc{name: name, done: make(chan struct{}), expected: make(chan struct{}), started: time.Now()}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, nil, err
	}
	// One log file holds every generation of a process; mark where each starts.
	fmt.Fprintf(logf, "=== %s starting at %s: ehsink %s\n", name, p.started.UTC().Format(time.RFC3339Nano), strings.Join(args, " "))
	p.cmd = exec.Command(binary, args...)
	p.cmd.Dir = dir
	// Its own process group: a signal to the test binary is not its signal.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, nil, fmt.Errorf("start %s: %w", name, err)
	}
	lines := make(chan struct{})
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			l := sc.Text()
			fmt.Fprintln(logf, l)
			if onLine != nil {
				onLine(l)
			}
		}
		_, _ = io.Copy(logf, stderr)
	}()
	out := bufio.NewScanner(stdout)
	go func() {
		<-lines
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, out, nil
}

// signal sends sig, marking the exit that follows as expected.
func (p *proc) signal(sig syscall.Signal) {
	p.once.Do(func() { close(p.expected) })
	_ = p.cmd.Process.Signal(sig)
}

// kill9 kills the process and waits for it.
func (p *proc) kill9() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *proc) wasExpected() bool {
	select {
	case <-p.expected:
		return true
	default:
		return false
	}
}

// exitCode is the process's exit status, -1 for a signal.
func (p *proc) exitCode() int {
	var ee *exec.ExitError
	if p.err == nil {
		return 0
	}
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -2
}

// freePort asks the kernel for a free loopback port, kept for restarts.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// emulatorProc runs `ehsink emulator` on fixed ports and a data dir, so that
// a restart serves the same hubs, and the same schema registry, at the
// same addresses.
type emulatorProc struct {
	port, adminPort int
	registry        string // the schema registry's URL
	caFile          string // the certificate its clients trust
	dataDir, logDir string
	args            []string
	mu              sync.Mutex // guards cur and gen
	cur             *proc
	gen             int
	conn            string // connection string of the JSON hub (hubName)
}

func newEmulator(runDir string, partitions int, groups []string) (*emulatorProc, error) {
	var ports [4]int // AMQP, admin, schema registry, AMQPS (which nothing uses)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	// One certificate for every generation: a replica trusts the file it
	// read at its start, and the emulator is restarted under it.
	cert, key, err := writeCertificate(runDir)
	if err != nil {
		return nil, err
	}
	e := &emulatorProc{port: ports[0], adminPort: ports[1], registry: fmt.Sprintf("https://127.0.0.1:%d", ports[2]), caFile: cert,
		dataDir: filepath.Join(runDir, "emulator"), logDir: runDir}
	e.args = []string{"emulator", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--hub", fmt.Sprintf("%s=%d", hubName, partitions), "--hub", fmt.Sprintf("%s=%d", avroHub, partitions),
		"--schema-registry", fmt.Sprintf("127.0.0.1:%d", ports[2]), "--tls-cert", cert, "--tls-key", key,
		"--tls-listen", fmt.Sprintf("127.0.0.1:%d", ports[3]), "--tls-cert-out", filepath.Join(runDir, "emulator-ca.pem"),
		"--data-dir", e.dataDir, "--admin", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--log-level", "warn"}
	for _, g := range groups {
		e.args = append(e.args, "--consumer-group", g)
	}
	return e, nil
}

// start starts a new generation and returns once the admin endpoint answers.
func (e *emulatorProc) start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gen++
	p, stdout, err := startProc(fmt.Sprintf("emulator#%d", e.gen), e.logDir, filepath.Join(e.logDir, "emulator.log"), e.args, nil)
	if err != nil {
		return err
	}
	e.cur = p
	first := make(chan string, 1)
	go func() {
		line := ""
		if stdout.Scan() {
			line = stdout.Text()
		}
		first <- line
		for stdout.Scan() {
		}
	}()
	select {
	case line := <-first:
		if !strings.HasPrefix(line, "Endpoint=") {
			return fmt.Errorf("emulator: first line %q is not a connection string (log %s)", line, filepath.Join(e.logDir, "emulator.log"))
		}
		e.conn = line
	case <-ctx.Done():
		return ctx.Err()
	}
	return waitHTTP(ctx, e.adminURL("/health"), "GET")
}

func (e *emulatorProc) current() *proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

func (e *emulatorProc) adminURL(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", e.adminPort, path)
}

// admin posts a fault to the emulator's admin endpoint and returns its answer.
func (e *emulatorProc) admin(ctx context.Context, pathAndQuery string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", e.adminURL(pathAndQuery), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return strings.TrimSpace(string(b)), fmt.Errorf("admin %s: %s", pathAndQuery, resp.Status)
	}
	return strings.TrimSpace(string(b)), nil
}

// waitHTTP polls url until it answers 200 or ctx ends.
func waitHTTP(ctx context.Context, url, method string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", url, ctx.Err())
		case <-tick.C:
		}
	}
}
