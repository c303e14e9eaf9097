package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ehsink/ehsink/internal/testenv"
)

// TestMakeRunCtrlC runs `make run` on the shipped connectors.yaml in a
// terminal of its own (a pseudo-terminal that is the session's controlling
// terminal) and presses Ctrl-C as a user does: the terminal's line
// discipline signals its whole foreground process group, make included,
// not ehsink alone. ehsink must drain, and make must exit 0, also when its
// output goes through a pipe (`make run 2>&1 | tee`) or to a file, or its
// stdin is not the terminal: there the terminal's SIGINT used to reach make
// (exit 130, or 141 through tee) and leave ehsink running undrained.
// Afterwards no ehsink of the run is left.
func TestMakeRunCtrlC(t *testing.T) {
	makeBin := lookMake(t)
	for _, tc := range []struct {
		name string
		// shell is the command line the terminal's shell runs; it exits
		// with make's status. $MAKE_RUN is the `make run` command.
		shell string
		// log is where ehsink's logs go, "" for the terminal itself.
		log string
	}{
		{name: "terminal", shell: `$MAKE_RUN`},
		{name: "piped through tee", shell: `$MAKE_RUN 2>&1 | tee run.log >/dev/null; exit ${PIPESTATUS[0]}`, log: "run.log"},
		{name: "stderr to a file", shell: `$MAKE_RUN 2>run.log`, log: "run.log"},
		{name: "stdin not the terminal", shell: `$MAKE_RUN </dev/null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := shippedConfigDir(t)
			cmd := exec.Command("bash", "-c", tc.shell)
			cmd.Dir = dir
			cmd.Env = userMakeEnv(makeBin)
			term := startInTerminal(t, cmd)

			logs := func() string {
				if tc.log == "" {
					return term.output()
				}
				b, _ := os.ReadFile(filepath.Join(dir, tc.log))
				return string(b)
			}
			waitFor(t, 90*time.Second, func() bool {
				return strings.Contains(logs(), `msg="partition claimed"`) && strings.Contains(term.output()+logs(), `"order_id":"o-`)
			}, func() string { return "ehsink did not start reading:\n" + term.output() + logs() })

			term.press(t, "\x03") // Ctrl-C
			status, err := term.wait(60 * time.Second)
			if err != nil {
				t.Fatalf("%v\n%s", err, term.output()+logs())
			}
			if status != 0 {
				t.Errorf("after Ctrl-C, `%s` exited %d, want 0:\n%s", tc.shell, status, term.output()+logs())
			}
			if !strings.Contains(logs(), `msg=stopped`) {
				t.Errorf("ehsink did not drain and stop after Ctrl-C:\n%s", logs())
			}
			if pids := processesIn(dir, binary); len(pids) > 0 {
				for _, p := range pids {
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
				t.Errorf("ehsink still running after make exited (pids %v)", pids)
			}
		})
	}
}

// lookMake returns the path of make.
func lookMake(t *testing.T) string {
	t.Helper()
	makeBin, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is needed to test `make run`: %v", err)
	}
	return makeBin
}

// shippedConfigDir returns a new directory holding the shipped
// connectors.yaml, where `make run` keeps its state.
func shippedConfigDir(t *testing.T) string {
	t.Helper()
	shipped, err := os.ReadFile(filepath.Join(root, "connectors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "connectors.yaml"), shipped, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// userMakeEnv is the environment of a user's shell whose $MAKE_RUN is
// `make run` with the test's binary: -o build, since the binary is already
// built (TestMain), so make runs the run recipe alone, as it does after its
// build; no MAKEFLAGS, so it is a user's make, not one nested in the make
// that runs the tests.
func userMakeEnv(makeBin string) []string {
	makeRun := fmt.Sprintf("%s -f %s -o build run BIN=%s", makeBin, filepath.Join(root, "Makefile"), binary)
	return append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	}), "MAKE_RUN="+makeRun)
}

// TestMakeRunWithoutTerminal runs `make run` on the shipped connectors.yaml
// with no controlling terminal (a session of its own, stdin /dev/null), as
// a container without a terminal, a supervisor or a CI job does. It must
// run (make's shell is /bin/sh, dash on Debian, which exits 2 when a
// special built-in's redirection fails: the recipe's check for a terminal
// once did that), and a SIGINT to ehsink, as a supervisor sends, drains it
// and make exits 0.
func TestMakeRunWithoutTerminal(t *testing.T) {
	makeBin := lookMake(t)
	dir := shippedConfigDir(t)
	cmd := exec.Command("bash", "-c", `exec $MAKE_RUN`)
	cmd.Dir = dir
	cmd.Env = userMakeEnv(makeBin)
	var out testenv.LogBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for _, p := range processesIn(dir, binary) {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	waitFor(t, 90*time.Second, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("make run exited before reading (%v):\n%s", err, out.String())
		default:
		}
		return strings.Contains(out.String(), `msg="partition claimed"`) && strings.Contains(out.String(), `"order_id":"o-`)
	}, func() string { return "ehsink did not start reading:\n" + out.String() })
	pids := processesIn(dir, binary)
	if len(pids) != 1 {
		t.Fatalf("want one ehsink of the run, found %v", pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGINT to ehsink, make run: %v, want exit 0:\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("make run still running 60s after SIGINT to ehsink:\n%s", out.String())
	}
	if !strings.Contains(out.String(), `msg=stopped`) {
		t.Errorf("ehsink did not drain and stop after SIGINT:\n%s", out.String())
	}
}

// terminal is a pseudo-terminal whose slave side is a command's controlling
// terminal and stdin, stdout and stderr.
type terminal struct {
	master *os.File
	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	out    strings.Builder
}

func startInTerminal(t *testing.T, cmd *exec.Cmd) *terminal {
	t.Helper()
	master, slave, err := openPTY()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	// A session of its own with the terminal as its controlling terminal
	// (Ctty is the child's fd 0): its shell is the foreground group, as a
	// login shell's command is.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		master.Close()
		slave.Close()
		t.Fatal(err)
	}
	slave.Close()
	term := &terminal{master: master, cmd: cmd, done: make(chan struct{})}
	go func() {
		// The terminal is read until every process holding it has exited
		// (then the read fails with EIO), so that no writer blocks on it.
		defer close(term.done)
		buf := make([]byte, 32<<10)
		for {
			n, err := master.Read(buf)
			term.mu.Lock()
			term.out.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_, _ = cmd.Process.Wait()
		}
		master.Close()
	})
	return term
}

func (term *terminal) output() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.out.String()
}

// press types keys on the terminal, as a user does.
func (term *terminal) press(t *testing.T, keys string) {
	t.Helper()
	if _, err := io.WriteString(term.master, keys); err != nil {
		t.Fatalf("type %q on the terminal: %v", keys, err)
	}
}

// wait returns the command's exit status (128+n when a signal n ended it).
func (term *terminal) wait(timeout time.Duration) (int, error) {
	exited := make(chan error, 1)
	go func() { exited <- term.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		switch {
		case err == nil:
		case errors.As(err, &ee):
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				return 128 + int(ws.Signal()), nil
			}
			return ee.ExitCode(), nil
		default:
			return -1, err
		}
		select {
		case <-term.done:
		case <-time.After(5 * time.Second):
		}
		return 0, nil
	case <-time.After(timeout):
		_ = syscall.Kill(-term.cmd.Process.Pid, syscall.SIGKILL)
		return -1, fmt.Errorf("still running %s after Ctrl-C", timeout)
	}
}

// openPTY opens a new pseudo-terminal pair (posix_openpt, unlockpt,
// ptsname).
func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("ptsname: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, s, nil
}

// processesIn lists the running processes of the executable exe whose
// working directory is dir.
func processesIn(dir, exe string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		path, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if cwd == dir && path == exe {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitFor polls cond every 100 ms until it holds, failing with msg() after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, msg func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(msg())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
