package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/hub"
	"github.com/ehsink/ehsink/secret"
)

// repeated is a flag.Value collecting every occurrence of a flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// runEmulator runs `ehsink emulator`: an Event Hubs emulator on loopback
// until ctx is cancelled (SIGINT/SIGTERM). The first line of stdout is the
// connection string of the first hub, then one line per further hub.
func runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var hubs, groups, keys repeated
	listen := fs.String("listen", "127.0.0.1:5672", "AMQP listen `address`; keep it on loopback unless you mean to expose it")
	fs.Var(&hubs, "hub", "event hub as `name=partitions` (repeatable; default orders=4)")
	fs.Var(&groups, "consumer-group", "consumer group `name` declared on every hub besides $Default (repeatable)")
	fs.Var(&keys, "key", "SAS key as `name=key` (repeatable); with keys, CBS tokens are verified and bad ones get 401")
	dataDir := fs.String("data-dir", "", "keep events in segment files under `dir` so a restart serves them again (default: memory only)")
	fsync := fs.String("fsync", "interval", "with --data-dir, when to fsync: `policy` interval (every second), always (every send) or never")
	retention := fs.Duration("retention", 24*time.Hour, "drop events older than this `duration` (0 keeps them forever)")
	retentionBytes := fs.Int64("retention-bytes", 0, "keep at most this many `bytes` per partition (0 = unlimited)")
	maxMsg := fs.Int64("max-message-size", emulator.DefaultMaxMessageSize, "largest message (batch) in `bytes` a sender may send")
	admin := fs.String("admin", "", "admin HTTP `address` for /health and fault injection, e.g. 127.0.0.1:5300 (default: off)")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log `format`: text or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: ehsink emulator [flags]

Runs an Azure Event Hubs emulator that the azeventhubs SDK (and ehsink run)
reach over AMQP with the connection string printed on the first line of
stdout. Logs go to stderr. Stops cleanly on SIGINT or SIGTERM.

Example:
  ehsink emulator --hub orders=4 --hub payments=2 --consumer-group audit --admin 127.0.0.1:5300

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ehsink emulator: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if len(hubs) == 0 {
		hubs = repeated{"orders=4"}
	}
	fsyncPolicy, err := hub.ParseFsyncPolicy(*fsync)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: --fsync: %v\n", err)
		return exitUsage
	}
	cfg := emulator.Config{
		Fsync:          fsyncPolicy,
		Addr:           *listen,
		DataDir:        *dataDir,
		Retention:      *retention,
		RetentionBytes: *retentionBytes,
		MaxMessageSize: *maxMsg,
		AdminAddr:      *admin,
	}
	for _, h := range hubs {
		name, n, ok := strings.Cut(h, "=")
		parts, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || parts < 1 {
			fmt.Fprintf(stderr, "ehsink emulator: --hub %q: want name=partitions, for example orders=4\n", h)
			return exitUsage
		}
		cfg.Hubs = append(cfg.Hubs, emulator.HubConfig{Name: name, Partitions: parts, ConsumerGroups: groups})
	}
	for _, k := range keys {
		name, key, ok := strings.Cut(k, "=")
		if !ok || name == "" || key == "" {
			fmt.Fprintf(stderr, "ehsink emulator: --key %q: want name=key\n", k)
			return exitUsage
		}
		if cfg.Keys == nil {
			cfg.Keys = map[string]secret.String{}
		}
		cfg.Keys[name] = secret.String(key)
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitUsage
	}
	cfg.Logger = log
	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitFailure
	}
	for _, h := range cfg.Hubs {
		fmt.Fprintln(stdout, srv.ConnectionString(h.Name))
	}
	if a := srv.AdminAddr(); a != "" {
		log.Info("admin server listening", "addr", a)
	}
	<-ctx.Done()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitFailure
	}
	return exitOK
}
