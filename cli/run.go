package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/logflags"
)

const runUsage = `Usage: ehsink run [-c connectors.yaml] [--connector NAME]... [--http ADDR] [--log-level info] [--log-format text|json]

Runs the connectors declared in the config file (all of them, or those named
by --connector) until SIGINT or SIGTERM. The first signal stops receiving,
finishes the batches in flight, flushes and checkpoints them within the
file's drain_timeout, and exits 0; a second signal exits at once with 1.
A stop still running 15s past drain_timeout (a call that never returns)
exits 1 by itself, with the goroutines' stacks on stderr.

The config is checked first, as 'ehsink validate' does: every problem is
reported with its path, and the exit status is 2. ${VAR} references in the
file are expanded, and EHSINK_ variables override single values, e.g.
EHSINK_CONNECTORS__ORDERS__SINK__TABLE=orders_v2 (a double underscore
separates keys; a connector is named by its name or index). Logs go to
stderr, never stdout (which the stdout sink may use). --log-level debug also
logs the Azure SDK, with keys and signatures redacted.

--http ADDR (or http.listen in the file) serves the operations API:
/metrics (Prometheus: events committed, lag per partition, connector
state, circuit breaker state, partition heals, ...), /healthz, /readyz, /v1/connectors (status, pause, resume,
restart) and, with http.pprof: true, /debug/pprof/. Pause, resume and
restart need the bearer token of http.token or http.token_file; with
neither set they are served only on a loopback listener and refused with
403 elsewhere. Probes, /metrics and status need no token.
--metrics ADDR is the same flag under its former name.

Connectors are isolated: one that fails for good (its config, credentials,
a table that does not match) logs one ERROR and stops alone while the others
keep running; a sink unreachable at start is waited for, holding no
partition. The process exits when stopped by a signal, or at once when every
connector has failed.

Without GOGC in the environment, the garbage collector runs at GOGC=200
(Go's default is 100): fewer collections of the SDK's per-event garbage, for
a heap that grows to about three times what is live, instead of twice.
GOGC=100 restores Go's default. Without GOMEMLIMIT, a container's memory
limit (cgroup v2 memory.max) sets the heap's soft limit to 90 % of it, so
the collector works harder before the limit instead of the process being
killed at it.

Exit status: 0 stopped cleanly, 1 a connector failed (at any time during the
run) or a drain did not finish, 2 bad usage or config.
`

// defaultGCPercent is the collector's target that `ehsink run` sets when
// GOGC is not in its environment. Most of what ehsink allocates per event
// is the SDK's and go-amqp's (about four in five objects), garbage at once;
// the live heap is what the configuration bounds (prefetch, batches, open
// files), so a higher target costs a bounded amount of memory and saves
// collector CPU on every event.
const defaultGCPercent = 200

// cgroupMemoryMax is where a cgroup v2 container sees its memory limit.
const cgroupMemoryMax = "/sys/fs/cgroup/memory.max"

// setMemoryLimit sets the heap's soft limit to 90 % of the container's
// memory limit read from the file at path, unless GOMEMLIMIT is set or
// there is no limit ("max", no file). It returns the limit set, or 0.
func setMemoryLimit(getenv func(string) string, path string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	max, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || max <= 0 {
		return 0 // "max": no limit
	}
	limit := max / 10 * 9
	debug.SetMemoryLimit(limit)
	return limit
}

// setGCPercent applies defaultGCPercent unless GOGC is set (to anything:
// the user chose) and returns the target in force.
func setGCPercent(getenv func(string) string) int {
	if v := getenv("GOGC"); v != "" {
		p := debug.SetGCPercent(-1)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(defaultGCPercent)
	return defaultGCPercent
}

// runRun is `ehsink run`.
func (o Options) runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "run", runUsage)
	path := fs.String("c", "connectors.yaml", "the config `file`")
	var names stringList
	fs.Var(&names, "connector", "run only the connector `NAME` (repeatable; default all)")
	level := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	format := fs.String("log-format", "text", "log `format`: text or json")
	var httpAddr string
	fs.StringVar(&httpAddr, "http", "", "serve the operations API (metrics, probes, status) on `ADDR`, e.g. 127.0.0.1:9464; overrides http.listen; default off")
	fs.StringVar(&httpAddr, "metrics", "", "the former name of --http")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	logger, err := logflags.New(stderr, *level, *format)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink run: %v\n", err)
		return exitUsage
	}
	cfg, err := o.load(*path)
	if err != nil {
		printProblems(stderr, *path, err)
		return exitUsage
	}
	if err := checkNames(cfg, names); err != nil {
		fmt.Fprintf(stderr, "ehsink run: %v\n", err)
		return exitUsage
	}
	// Set once, before any SDK client exists, and never reset: SDK
	// goroutines may still log while the process exits.
	bridgeAzureLogs(logger)
	logger.Debug("garbage collector", "gogc", setGCPercent(os.Getenv), "memory_limit", setMemoryLimit(os.Getenv, cgroupMemoryMax))

	opts := connector.RunOptions{Connectors: names, Logger: logger, Control: connector.NewControl(), DevEnv: o.DevEnv}
	if httpAddr == "" && cfg.HTTP != nil {
		httpAddr = cfg.HTTP.Listen
	}
	if httpAddr != "" {
		met, stop, err := opsServer(httpAddr, cfg.HTTP, opts.Control, logger)
		if err != nil {
			fmt.Fprintf(stderr, "ehsink run: %v\n", err)
			return exitFailure
		}
		defer stop()
		opts.Metrics = met
	}
	started := []any{"config", *path, "connectors", len(cfg.Connectors)}
	if len(names) > 0 { // --connector chose some; otherwise all run
		started = append(started, "selected", []string(names))
	}
	logger.Info("starting", started...)
	drain := cfg.DrainTimeout
	if drain == 0 {
		drain = connector.DefaultDrainTimeout
	}
	err = stopWithin(ctx, drain+stopGrace, stderr, func() error { return connector.Run(ctx, cfg, opts) })
	if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped by a signal while still starting (dialling, claiming):
		// nothing was in flight, so this is a clean stop too.
		logger.Info("stopped while starting", "reason", err)
		err = nil
	}
	if err != nil {
		logger.Error("stopped on failure", "err", err)
		return exitFailure
	}
	logger.Info("stopped")
	return exitOK
}

// stopGrace is how long a stop may take past drain_timeout: after the
// drain the source closes its links and connections and gives its leases
// up, each close bounded at 10 s.
const stopGrace = 15 * time.Second

// errStopTimedOut is stopWithin's error when the stop outlived its bound.
var errStopTimedOut = errors.New("the stop did not finish in time")

// stopWithin runs run and returns its error; once ctx is cancelled (the
// signal), it waits at most bound for run to return. Past it, the stop is
// stuck (a call that ignores its context): the goroutines' stacks go to
// dump, for the bug report, and it returns errStopTimedOut without
// waiting, so that the process exits rather than hang until a supervisor
// kills it. What was not drained is replayed by the next owner, as after a
// kill.
func stopWithin(ctx context.Context, bound time.Duration, dump io.Writer, run func() error) error {
	done := make(chan error, 1)
	go func() { done <- run() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		fmt.Fprintf(dump, "ehsink: the stop is still running %s after the signal; the goroutines:\n", bound)
		_ = pprof.Lookup("goroutine").WriteTo(dump, 1)
		return fmt.Errorf("%w: still running %s after the signal (drain_timeout + %s); what was not drained is replayed by the next owner", errStopTimedOut, bound, stopGrace)
	}
}

// checkNames reports names that are not connectors of cfg.
func checkNames(cfg *connector.Config, names []string) error {
	var known []string
	for _, c := range cfg.Connectors {
		known = append(known, c.Name)
	}
	var missing []string
	for _, n := range names {
		if !slices.Contains(known, n) {
			missing = append(missing, fmt.Sprintf("%q", n))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("--connector %s: no such connector (connectors: %s)", strings.Join(missing, ", "), strings.Join(known, ", "))
	}
	return nil
}

// printProblems writes a config error: one problem per line, each with its
// path, with anything that looks like a credential redacted (a sink's
// validator may quote a value the user filled from the wrong variable).
func printProblems(w io.Writer, path string, err error) {
	problems := config.Errors(err)
	if len(problems) == 1 && problems[0].Path == "" {
		// The file could not be read or parsed; the error names it.
		fmt.Fprintf(w, "ehsink: %s\n", redact(problems[0].Err.Error()))
		return
	}
	noun := "problems"
	if len(problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(w, "%s: %d %s:\n", path, len(problems), noun)
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", redact(p.Error()))
	}
}
