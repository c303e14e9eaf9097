// Package cli is the ehsink command line: run, validate, checkpoints,
// status, send, version and the other commands, over whatever sinks the
// binary registers. A custom build is a main package that imports its sink
// packages (each registers itself) and calls [Main]:
//
//	package main
//
//	import (
//		"context"
//		"os"
//
//		"github.com/ehsink/ehsink/cli"
//		_ "example.com/mysink"
//	)
//
//	func main() { os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Options{})) }
//
// Exit status: 0 ok, 1 runtime failure, 2 usage or config error.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connector"
)

// Exit codes of every command.
const (
	exitOK      = 0 // done, or stopped cleanly by a signal
	exitFailure = 1 // a runtime failure
	exitUsage   = 2 // bad flags or an invalid config
)

// command is one subcommand of ehsink. run has the same signature for all:
// ctx is cancelled on the first SIGINT/SIGTERM; args are those after the
// command's name; it returns the exit code.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the command table, in the order `ehsink --help` lists them.
func (o Options) commands() []command {
	emulatorSummary := "run the built-in Event Hubs emulator (AMQP 1.0) for local development"
	if o.DevEnv == nil {
		emulatorSummary += " (not in this binary)"
	}
	return []command{
		{"run", "run the connectors of a connectors.yaml", o.runRun},
		{"validate", "check a connectors.yaml and report every problem; --print shows the effective config", o.runValidate},
		{"test", "run the unit tests of a config: events in, expected rows or dead letters out, no services", runTest},
		{"emulator", emulatorSummary, o.runEmulator},
		{"send", "send events (lines or demo orders) to an event hub", runSend},
		{"checkpoints", "list checkpoints and owners with lag, or reset them", runCheckpoints},
		{"deadletters", "list, show and replay the dead letters a connector's sink keeps", runDeadletters},
		{"status", "show the connectors of a running ehsink (its operations API), --watch to follow", runStatus},
		{"version", "print the version, commit and Go version", o.runVersion},
	}
}

// Options configure [Main]. The zero value is a complete CLI over the
// sinks the binary registers.
type Options struct {
	// Name is the program's name in --help, each command's usage, its
	// flag errors and `version` (a custom binary: "ehsink-jsonfiles"). If
	// empty, "ehsink".
	Name string
	// Version and Commit are what `version` prints; when empty, they come
	// from the build info Go records (module version, VCS revision).
	Version, Commit string
	// Stdout and Stderr receive the commands' output and logs. If nil,
	// os.Stdout and os.Stderr.
	Stdout, Stderr io.Writer
	// DevEnv is the development environment: the in-process emulator of
	// an `emulator:` block and the `emulator` command. Set it to
	// devenv.New() (package github.com/ehsink/ehsink/cli/devenv) to have them;
	// if nil, the binary does not link the emulator, and validate and run
	// reject a config with an `emulator:` block.
	DevEnv DevEnv
}

// DevEnv is what the development environment gives the CLI; devenv.New()
// implements it.
type DevEnv interface {
	connector.DevEnv
	// EmulatorCommand runs `ehsink emulator` with the arguments after the
	// command's name and returns its exit status.
	EmulatorCommand(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Main runs the ehsink command named by args[0] (args are the process
// arguments without the program name) and returns its exit status, for
// os.Exit. The first SIGINT or SIGTERM cancels the command's context (run
// then drains); a second one exits the process at once with status 1.
func Main(ctx context.Context, args []string, opts Options) int {
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	ctx, stop := signalContext(ctx, opts.Stderr, os.Exit)
	defer stop()
	return opts.dispatch(ctx, args, opts.Stdout, opts.Stderr)
}

// program is the name the CLI calls itself: Options.Name, or ehsink.
func (o Options) program() string {
	if o.Name != "" {
		return o.Name
	}
	return "ehsink"
}

// programKey carries the program's name to the commands' flag sets, whose
// usage texts are written for "ehsink".
type programKey struct{}

// programOf returns the program's name dispatch put in ctx, or ehsink.
func programOf(ctx context.Context) string {
	if name, ok := ctx.Value(programKey{}).(string); ok {
		return name
	}
	return "ehsink"
}

// renamed rewrites a text written for "ehsink " (usage, examples) for
// the program prog, keeping the continuation lines of a usage line aligned
// under its flags.
func renamed(text, prog string) string {
	if prog == "ehsink" {
		return text
	}
	pad := strings.Repeat(" ", max(len(prog)-len("ehsink"), 0))
	lines := strings.Split(text, "\n")
	inUsage := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "Usage: ehsink "):
			inUsage = true
		case inUsage && strings.HasPrefix(l, "          "):
			lines[i] = pad + l
		default:
			inUsage = false
		}
		lines[i] = strings.ReplaceAll(lines[i], "ehsink ", prog+" ")
	}
	return strings.Join(lines, "\n")
}

// runEmulator is `ehsink emulator`, when the binary has the development
// environment.
func (o Options) runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if o.DevEnv == nil {
		fmt.Fprintln(stderr, "ehsink emulator: this binary is built without the development environment (github.com/ehsink/ehsink/cli/devenv: cli.Options{DevEnv: devenv.New()}); the ehsink binary has it")
		return exitUsage
	}
	return o.DevEnv.EmulatorCommand(ctx, args, stdout, stderr)
}

// load loads a config as run runs it: with connector.Load's checks, and an
// `emulator:` block only in a binary with the development environment.
func (o Options) load(path string) (*connector.Config, error) {
	cfg, err := connector.Load(path, connector.LoadOptions{})
	if err != nil {
		return nil, err
	}
	if cfg.Emulator != nil && o.DevEnv == nil {
		return nil, &config.Error{Path: "emulator", Err: connector.ErrNoDevEnv}
	}
	return cfg, nil
}

// dispatch runs the command named by args[0].
func (o Options) dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx = context.WithValue(ctx, programKey{}, o.program())
	if len(args) == 0 {
		o.usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(rest) > 0 {
			// `ehsink help run` is `ehsink run --help`.
			return o.dispatch(ctx, []string{rest[0], "--help"}, stdout, stderr)
		}
		o.usage(stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	var names []string
	for _, c := range o.commands() {
		if c.name == name {
			return c.run(ctx, rest, stdout, stderr)
		}
		names = append(names, c.name)
	}
	hint := ""
	for _, n := range names {
		if strings.HasPrefix(n, name) || strings.HasPrefix(name, n) {
			hint = fmt.Sprintf(" (did you mean %s?)", n)
			break
		}
	}
	fmt.Fprintf(stderr, "%[1]s: unknown command %[2]q%[3]s\nRun '%[1]s --help' for the commands.\n", o.program(), name, hint)
	return exitUsage
}

func (o Options) usage(w io.Writer) {
	prog := o.program()
	if prog == "ehsink" {
		fmt.Fprint(w, "ehsink moves events from Azure Event Hubs into sinks, effectively once.\n")
	} else {
		fmt.Fprintf(w, "%s is ehsink with its own sinks (%s): it moves events from Azure Event Hubs\ninto sinks, effectively once.\n", prog, strings.Join(registeredSinks(), ", "))
	}
	fmt.Fprintf(w, "\nUsage: %s <command> [flags]\n\nCommands:\n", prog)
	for _, c := range o.commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, renamed(c.summary, prog))
	}
	fmt.Fprintf(w, `
Run '%s <command> --help' for the flags of a command.
Exit status: 0 ok, 1 runtime failure, 2 usage or config error.
`, prog)
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM
// (the run command then drains: batches in flight are flushed and
// checkpointed). A second signal calls exit(1) at once. stop releases the
// signals and the goroutine watching them, and waits for it.
func signalContext(parent context.Context, stderr io.Writer, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "ehsink: %s: stopping (finishing the batches in flight); send it again to exit at once\n", s)
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			fmt.Fprintf(stderr, "ehsink: second %s: exiting now\n", s)
			exit(exitFailure)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		<-exited
		cancel()
	}
}

// flagSet is a flag.FlagSet with the usage text of its command.
type flagSet struct {
	*flag.FlagSet
	usage string // printed before the flags by --help and on usage errors
}

// newFlagSet returns the flag set of command name, named and documented
// for the program in ctx (see Options.Name).
func newFlagSet(ctx context.Context, name, usage string) *flagSet {
	prog := programOf(ctx)
	fs := flag.NewFlagSet(prog+" "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{FlagSet: fs, usage: renamed(usage, prog)}
}

func (fs *flagSet) printUsage(w io.Writer) {
	fmt.Fprint(w, fs.usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// parse parses args: --help prints the usage to stdout (exit 0); a bad flag
// or a positional argument prints the problem and the usage to stderr
// (exit 2). ok is false when the command must return code.
func (fs *flagSet) parse(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.printUsage(stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
	default:
		return 0, true
	}
	fs.printUsage(stderr)
	return exitUsage, false
}

// actionFlagSet starts a command whose first argument is an action
// (`checkpoints list`): it returns the command's flag set and the action,
// or, when there is none to run (none given, an unknown one, --help), ok
// false and the exit code, having printed what to print.
func actionFlagSet(ctx context.Context, name, usage string, actions, args []string, stdout, stderr io.Writer) (fs *flagSet, action string, code int, ok bool) {
	fs = newFlagSet(ctx, name, usage)
	switch {
	case len(args) == 0:
		fs.printUsage(stderr)
		return fs, "", exitUsage, false
	case args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help":
		fs.printUsage(stdout)
		return fs, "", exitOK, false
	case !slices.Contains(actions, args[0]):
		fmt.Fprintf(stderr, "ehsink %s: unknown action %q (want %s)\n", name, args[0], strings.Join(actions, ", "))
		return fs, "", exitUsage, false
	}
	return fs, args[0], 0, true
}

// stringList is a repeatable string flag; a comma also separates values.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(s string) error {
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}
