package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresDSNEnv names an existing PostgreSQL server to test against
// instead of a throwaway one, like pgx's PGX_TEST_DATABASE. The role must
// be allowed to create databases.
const PostgresDSNEnv = "EHSINK_TEST_POSTGRES_DSN"

// pgInstallHint is how a developer gets the server binaries.
const pgInstallHint = "run test/scripts/install-postgres.sh (apt-get install postgresql-15), or set " + PostgresDSNEnv

// pgBinDirs are searched, in order, for initdb and pg_ctl before PATH.
var pgBinDirs = []string{"/usr/lib/postgresql/15/bin"}

// pgCommandTimeout bounds initdb and pg_ctl. It is a readiness bound, not an
// assertion: a shared, busy machine gets ample room.
const pgCommandTimeout = 2 * time.Minute

// ErrExternalPostgres is returned by Stop and Start of an instance named by
// EHSINK_TEST_POSTGRES_DSN: the tests do not own that server.
var ErrExternalPostgres = errors.New("testenv: the server named by " + PostgresDSNEnv + " is not ours to stop or start")

// PostgresInstance is a PostgreSQL server for tests: a throwaway cluster
// this package started (initdb + pg_ctl, in a temp dir, on a free loopback
// port, fsync off), or the server named by EHSINK_TEST_POSTGRES_DSN. It is
// safe for concurrent use.
type PostgresInstance struct {
	dsn      string // superuser DSN to the maintenance database
	external bool
	binDir   string
	dir      string // owns data/, the log and the socket; removed on Stop
	port     int
	asUser   string // OS user to run the server as ("" = ourselves)
	durable  bool   // synchronous_commit on: a commit survives Crash
	mu       sync.Mutex
	stopped  bool
	dbs      atomic.Int64 // counter for database names
	shutdown sync.Once
	// reaper stops the server and removes dir when this process ends
	// without shutdownAndRemove (see startReaper); reaperEnd is the write
	// end of its stdin, closed to let it go.
	reaper    *exec.Cmd
	reaperEnd *os.File
}

var sharedPG struct {
	once sync.Once
	inst *PostgresInstance
	err  error
}

// Postgres returns the PostgreSQL server shared by the whole test binary,
// starting it on first use. Tests isolate themselves with NewDatabase.
//
// When neither EHSINK_TEST_POSTGRES_DSN nor the server binaries are there,
// the test is skipped, or failed when CI=true. The shared server is stopped
// by StopSharedPostgres, which a package that uses it calls from TestMain
// after m.Run (or through Main). A binary that ends without it (no such
// TestMain, a test timeout's panic, a kill) leaves nothing running either:
// a reaper process stops the server and removes its directory once the
// binary is gone (startReaper), which takes it a moment longer.
func Postgres(t testing.TB) *PostgresInstance {
	t.Helper()
	if dsn := os.Getenv(PostgresDSNEnv); dsn != "" {
		sharedPG.once.Do(func() { sharedPG.inst = &PostgresInstance{dsn: dsn, external: true} })
		return sharedPG.inst
	}
	bin := postgresBinDir(t)
	sharedPG.once.Do(func() { sharedPG.inst, sharedPG.err = startPostgres(bin) })
	if sharedPG.err != nil {
		t.Fatalf("testenv: %v", sharedPG.err)
	}
	return sharedPG.inst
}

// NewPostgres starts a private throwaway server for one test (for tests
// that stop and start it), stopped and removed by t.Cleanup. It ignores
// EHSINK_TEST_POSTGRES_DSN, since such a test must own its server.
func NewPostgres(t testing.TB) *PostgresInstance {
	t.Helper()
	inst, err := startPostgres(postgresBinDir(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(inst.shutdownAndRemove)
	return inst
}

// NewCrashablePostgres is [NewPostgres] for tests that [PostgresInstance.Crash]
// the server: commits are acknowledged only once their WAL is written
// (synchronous_commit on), so a crash keeps every acknowledged commit, as a
// production server does. fsync stays off: Crash ends the server's
// processes, not the machine, so the page cache survives.
func NewCrashablePostgres(t testing.TB) *PostgresInstance {
	t.Helper()
	inst, err := startPostgresWith(postgresBinDir(t), true)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(inst.shutdownAndRemove)
	return inst
}

// StopSharedPostgres stops the shared server, if this binary started one,
// and removes its files. Call it from TestMain after m.Run.
func StopSharedPostgres() {
	if sharedPG.inst != nil {
		sharedPG.inst.shutdownAndRemove()
	}
}

// Main runs the tests of a package and stops the shared services they
// started (PostgreSQL, Azurite) afterwards:
// func TestMain(m *testing.M) { testenv.Main(m) }.
func Main(m *testing.M) {
	code := m.Run()
	StopSharedPostgres()
	StopSharedAzurite()
	os.Exit(code)
}

// DSN returns a superuser DSN to the server's maintenance database.
func (p *PostgresInstance) DSN() string { return p.dsn }

// NewDatabase creates an empty database for the calling test, dropped by
// t.Cleanup, and returns a DSN to it.
func (p *PostgresInstance) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d_%s", p.dbs.Add(1), dbNameRe.ReplaceAllString(strings.ToLower(t.Name()), "_"))
	if len(name) > 60 {
		name = name[:60]
	}
	ctx, cancel := context.WithTimeout(context.Background(), pgCommandTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.dsn)
	if err != nil {
		t.Fatalf("testenv: connect to PostgreSQL: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("testenv: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), pgCommandTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, p.dsn)
		if err != nil {
			return // the server is gone (a stopped private instance): nothing to drop
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Logf("testenv: drop database %s: %v", name, err)
		}
	})
	return withDatabase(p.dsn, name)
}

var dbNameRe = regexp.MustCompile(`[^a-z0-9_]+`)

// withDatabase returns dsn pointing at database name: the path of a URL, or
// a dbname keyword appended to the keyword form (later keywords win).
func withDatabase(dsn, name string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			u.Path = "/" + name
			return u.String()
		}
	}
	return dsn + " dbname=" + name
}

// Stop stops the server (fast shutdown: clients are disconnected). The
// files stay, so Start brings the same data back.
func (p *PostgresInstance) Stop() error { return p.stop("fast") }

// Crash stops the server as a crash would (pg_ctl stop -m immediate: no
// checkpoint, clients cut off, WAL replayed by the next Start). The files
// stay, so Start brings the committed data back.
func (p *PostgresInstance) Crash() error { return p.stop("immediate") }

// stop runs pg_ctl stop in the given shutdown mode.
func (p *PostgresInstance) stop(mode string) error {
	if p.external {
		return ErrExternalPostgres
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	if err := p.pgctl("stop", "-m", mode); err != nil {
		return err
	}
	p.stopped = true
	return nil
}

// Start starts a server stopped by Stop or Crash again, on the same port, and
// returns when it accepts connections.
func (p *PostgresInstance) Start() error {
	if p.external {
		return ErrExternalPostgres
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		return nil
	}
	if err := p.pgctl("start", "-l", filepath.Join(p.dir, "server.log"), "-o", p.serverOptions()); err != nil {
		return err
	}
	p.stopped = false
	return nil
}

func (p *PostgresInstance) shutdownAndRemove() {
	p.shutdown.Do(func() {
		if p.external {
			return
		}
		_ = p.Stop()
		_ = os.RemoveAll(p.dir)
		if p.reaper != nil {
			// Nothing is left for it to do: it wakes, finds the server
			// stopped and the directory gone, and exits.
			_ = p.reaperEnd.Close()
			_ = p.reaper.Wait()
		}
	})
}

// reaperScript waits for its stdin to reach end of file, which happens
// when the test binary exits, however it exits (a package without a
// TestMain that calls StopSharedPostgres, a test timeout's panic, a
// SIGKILL), then runs its arguments after the first (pg_ctl stop) and
// removes the directory named by the first. It ignores the signals a
// terminal's Ctrl-C or hang-up sends the whole process group.
const reaperScript = `trap '' INT TERM HUP; read -r _; dir=$1; shift; "$@" >/dev/null 2>&1; rm -rf "$dir"`

// startReaper starts the process that stops the server when this process
// ends without shutdownAndRemove: the shared server is stopped from
// TestMain, and a package that never calls it (or a binary that dies
// first) must not leave a server and its temporary directory running
// after it. The reaper holds the read end of a pipe whose only write end
// is this process's (os.Pipe opens it close-on-exec, so pg_ctl and the
// server do not inherit it): the kernel closes it when the process ends.
func (p *PostgresInstance) startReaper() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("postgres reaper: %w", err)
	}
	defer r.Close() // the child has its copy
	args := []string{"-c", reaperScript, "ehsink-pg-reaper", p.dir}
	stop := []string{filepath.Join(p.binDir, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-m", "immediate", "-w", "stop"}
	if p.asUser != "" {
		stop = append([]string{"runuser", "-u", p.asUser, "--"}, stop...)
	}
	cmd := exec.Command("/bin/sh", append(args, stop...)...)
	cmd.Stdin = r
	// Its own process group: a Ctrl-C of `go test` must not end it
	// before it has stopped the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("postgres reaper: %w", err)
	}
	p.reaper, p.reaperEnd = cmd, w
	return nil
}

func (p *PostgresInstance) serverOptions() string {
	commit := "off"
	if p.durable {
		commit = "on"
	}
	return fmt.Sprintf("-c port=%d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off -c synchronous_commit=%s -c full_page_writes=off -c max_connections=200", p.port, p.dir, commit)
}

// pgctl runs pg_ctl on the instance's data directory and waits (-w) for the
// operation to finish: for start, until the server accepts connections.
func (p *PostgresInstance) pgctl(args ...string) error {
	full := append([]string{"-D", filepath.Join(p.dir, "data"), "-w", "-t", strconv.Itoa(int(pgCommandTimeout.Seconds()))}, args...)
	return p.run("pg_ctl", full...)
}

func (p *PostgresInstance) run(tool string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), pgCommandTimeout)
	defer cancel()
	name := filepath.Join(p.binDir, tool)
	if p.asUser != "" {
		args = append([]string{"-u", p.asUser, "--", name}, args...)
		name = "runuser"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = p.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		return fmt.Errorf("%s %s: %w\n%s\nserver log:\n%s", tool, strings.Join(args, " "), err, out, lastLines(log, 20))
	}
	return nil
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// postgresBinDir finds initdb and pg_ctl, or skips (fails under CI=true).
func postgresBinDir(t testing.TB) string {
	t.Helper()
	for _, dir := range pgBinDirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("testenv: PostgreSQL (initdb, pg_ctl) not found (CI=true, so this is a failure): %s", pgInstallHint)
	}
	t.Skipf("testenv: PostgreSQL (initdb, pg_ctl) not found, skipping: %s", pgInstallHint)
	return ""
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// startPostgres starts a throwaway cluster whose commits are asynchronous
// (fast; a Crash may lose the last ones).
func startPostgres(binDir string) (*PostgresInstance, error) { return startPostgresWith(binDir, false) }

// startPostgresWith creates a cluster in a new temp dir and starts it. As
// root (the server refuses to run as root), the files belong to the
// postgres OS user and the tools run through runuser.
func startPostgresWith(binDir string, durable bool) (*PostgresInstance, error) {
	dir, err := os.MkdirTemp("", "ehsink-pg-")
	if err != nil {
		return nil, fmt.Errorf("postgres temp dir: %w", err)
	}
	p := &PostgresInstance{binDir: binDir, dir: dir, stopped: true, durable: durable}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs the postgres OS user (installed with the server package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres temp dir: %w", err)
		}
		p.asUser = "postgres"
	}
	if err := p.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if p.port, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := p.startReaper(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := p.Start(); err != nil {
		p.shutdownAndRemove()
		return nil, err
	}
	p.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	return p, nil
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds it; pg_ctl then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
