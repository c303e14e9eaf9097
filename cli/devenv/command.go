package devenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/logflags"
	"github.com/ehsink/ehsink/internal/secret"
)

// repeated is a flag.Value collecting every occurrence of a flag.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ",") }
func (r *repeated) Set(v string) error { *r = append(*r, v); return nil }

// runEmulator runs `ehsink emulator`: an Event Hubs emulator on loopback
// until ctx is cancelled (SIGINT/SIGTERM). The first line of stdout is the
// connection string of the first hub, then one line per further hub.
// emulatorFlags are the flags of the emulator command.
type emulatorFlags struct {
	fs                                 *flag.FlagSet
	hubs, groups, keys, rights, keyHub repeated
	listen, tlsListen                  *string
	tlsCert, tlsKey, tlsCertOut        *string
	dataDir, fsync, admin              *string
	schemaRegistry, registryBasicAuth  *string
	logLevel, logFormat                *string
	useTLS                             *bool
	retention                          *time.Duration
	retentionBytes, maxMsg             *int64
}

func newEmulatorFlags(stderr io.Writer) *emulatorFlags {
	fs := flag.NewFlagSet("emulator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &emulatorFlags{fs: fs}
	f.listen = fs.String("listen", "127.0.0.1:5672", "AMQP listen `address`; keep it on loopback unless you mean to expose it")
	fs.Var(&f.hubs, "hub", "event hub as `name=partitions` (repeatable; default orders=4)")
	fs.Var(&f.groups, "consumer-group", "consumer group `name` declared on every hub besides $Default (repeatable)")
	fs.Var(&f.keys, "key", "SAS key as `name=key` (repeatable); with keys, tokens are verified and links authorized as on the service")
	fs.Var(&f.rights, "key-rights", "rights of a --key as `name=listen,send,manage` (repeatable; default all)")
	fs.Var(&f.keyHub, "key-hub", "scope a --key to one event hub as `name=hub`, like an entity-level policy (repeatable)")
	f.useTLS = fs.Bool("tls", false, "also listen for AMQPS (TLS), for SDKs that always use TLS; generates a certificate unless --tls-cert is given")
	f.tlsListen = fs.String("tls-listen", "127.0.0.1:5671", "AMQPS listen `address` (with --tls)")
	f.tlsCert = fs.String("tls-cert", "", "PEM certificate chain `file` for AMQPS (implies --tls; needs --tls-key)")
	f.tlsKey = fs.String("tls-key", "", "PEM private key `file` for AMQPS (with --tls-cert)")
	f.tlsCertOut = fs.String("tls-cert-out", ".ehsink/emulator-ca.pem", "`file` the certificate AMQPS and schema registry clients should trust is written to (with --tls or --schema-registry)")
	f.schemaRegistry = fs.String("schema-registry", "", "serve Azure Schema Registry and a Confluent-compatible registry over HTTPS on this `address`, e.g. 127.0.0.1:5443 (default: off)")
	f.registryBasicAuth = fs.String("schema-registry-basic-auth", "", "`user:password` the Confluent routes of --schema-registry require (default: none)")
	f.dataDir = fs.String("data-dir", "", "keep events in segment files under `dir` so a restart serves them again (default: memory only)")
	f.fsync = fs.String("fsync", "interval", "with --data-dir, when to fsync: `policy` interval (every second), always (every send) or never")
	f.retention = fs.Duration("retention", 24*time.Hour, "drop events older than this `duration` (0 keeps them forever)")
	f.retentionBytes = fs.Int64("retention-bytes", 0, "keep at most this many `bytes` per partition (0 = unlimited)")
	f.maxMsg = fs.Int64("max-message-size", 0, "largest message (batch) in `bytes` a sender may send (0: 1 MiB, the Standard tier's)")
	f.admin = fs.String("admin", "", "admin HTTP `address` for /health and fault injection, e.g. 127.0.0.1:5300 (default: off)")
	f.logLevel = fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	f.logFormat = fs.String("log-format", "text", "log `format`: text or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: ehsink emulator [flags]

Runs an Azure Event Hubs emulator that the azeventhubs SDK (and ehsink run)
reach over AMQP with the connection string printed on the first line of
stdout. Logs go to stderr. Stops cleanly on SIGINT or SIGTERM.

With --tls it also serves AMQPS on --tls-listen for clients that always
use TLS (the Python SDK before 5.12, older .NET and Java clients): it
generates a local certificate authority and a certificate for 127.0.0.1,
::1 and localhost, writes the authority to --tls-cert-out (printed on
stderr) for clients to trust, and prints one more connection string per
hub, without UseDevelopmentEmulator, after the plain ones.

With --schema-registry it serves Azure Schema Registry (what
@azure/schema-registry and the other Azure SDKs' registry clients call,
with https://ADDR as the namespace; tokens are checked as on AMQP) and
Confluent's registry routes on https://ADDR, with the same certificate,
written to --tls-cert-out. With --data-dir the schemas are kept there.

Examples:
  ehsink emulator --hub orders=4 --hub payments=2 --consumer-group audit --admin 127.0.0.1:5300
  ehsink emulator --tls --key root=c2VjcmV0 --key reader=cmVhZA== --key-rights reader=listen
  ehsink emulator --schema-registry 127.0.0.1:5443 --data-dir .ehsink/emulator

Flags:
`)
		fs.PrintDefaults()
	}
	return f
}

func runEmulator(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	f := newEmulatorFlags(stderr)
	fs := f.fs
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
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitUsage
	}
	log, err := logflags.New(stderr, *f.logLevel, *f.logFormat)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitUsage
	}
	cfg.Logger = log
	return serveEmulator(ctx, cfg, stdout, stderr)
}

// config builds the emulator's config from the flags, or says which flag
// is wrong.
func (f *emulatorFlags) config() (emulator.Config, error) {
	hubs := f.hubs
	if len(hubs) == 0 {
		hubs = repeated{"orders=4"}
	}
	fsyncPolicy, err := emulator.ParseFsyncPolicy(*f.fsync)
	if err != nil {
		return emulator.Config{}, fmt.Errorf("--fsync: %w", err)
	}
	cfg := emulator.Config{
		Fsync:          fsyncPolicy,
		Addr:           *f.listen,
		DataDir:        *f.dataDir,
		Retention:      *f.retention,
		RetentionBytes: *f.retentionBytes,
		MaxMessageSize: *f.maxMsg,
		AdminAddr:      *f.admin,

		SchemaRegistryAddr:      *f.schemaRegistry,
		SchemaRegistryBasicAuth: secret.String(*f.registryBasicAuth),
	}
	switch a := *f.registryBasicAuth; {
	case a != "" && *f.schemaRegistry == "":
		return cfg, errors.New("--schema-registry-basic-auth needs --schema-registry")
	case a != "" && !strings.Contains(a, ":"):
		return cfg, errors.New("--schema-registry-basic-auth: want user:password")
	}
	for _, h := range hubs {
		name, n, ok := strings.Cut(h, "=")
		parts, err := strconv.Atoi(n)
		if !ok || name == "" || err != nil || parts < 1 {
			return cfg, fmt.Errorf("--hub %q: want name=partitions, for example orders=4", h)
		}
		cfg.Hubs = append(cfg.Hubs, emulator.HubConfig{Name: name, Partitions: parts, ConsumerGroups: f.groups})
	}
	for _, k := range f.keys {
		name, key, ok := strings.Cut(k, "=")
		if !ok || name == "" || key == "" {
			return cfg, fmt.Errorf("--key %q: want name=key", k)
		}
		if cfg.Keys == nil {
			cfg.Keys = map[string]secret.String{}
		}
		cfg.Keys[name] = secret.String(key)
	}
	if err := applyKeyOptions(&cfg, f.rights, f.keyHub); err != nil {
		return cfg, err
	}
	certOut, err := filepath.Abs(*f.tlsCertOut)
	if err != nil {
		return cfg, fmt.Errorf("--tls-cert-out: %w", err)
	}
	if *f.useTLS || *f.tlsCert != "" || *f.tlsKey != "" {
		if (*f.tlsCert == "") != (*f.tlsKey == "") {
			return cfg, errors.New("--tls-cert and --tls-key go together")
		}
		cfg.TLS = &emulator.TLSOptions{Addr: *f.tlsListen, CertFile: *f.tlsCert, KeyFile: *f.tlsKey, CertOut: certOut}
	}
	if cfg.SchemaRegistryAddr != "" {
		cfg.SchemaRegistryCertOut = certOut
	}
	return cfg, nil
}

// serveEmulator starts the emulator, prints its connection strings and
// serves until ctx ends.
func serveEmulator(ctx context.Context, cfg emulator.Config, stdout, stderr io.Writer) int {
	log := cfg.Logger
	srv, err := emulator.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink emulator: %v\n", err)
		return exitFailure
	}
	for _, h := range cfg.Hubs {
		fmt.Fprintln(stdout, srv.ConnectionString(h.Name))
	}
	log.Info("emulator listening", "addr", srv.Addr(), "hubs", len(cfg.Hubs))
	if cfg.TLS != nil {
		for _, h := range cfg.Hubs {
			fmt.Fprintln(stdout, srv.TLSConnectionString(h.Name))
		}
		log.Info("AMQPS listening; clients trust the certificate file", "addr", srv.TLSAddr(), "cert", cfg.TLS.CertOut)
	}
	if a := srv.SchemaRegistryAddr(); a != "" {
		log.Info("schema registry listening; clients trust the certificate file", "url", "https://"+a, "cert", cfg.SchemaRegistryCertOut)
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

// applyKeyOptions turns --key-rights and --key-hub into policies: a key
// named in either leaves Keys for Policies.
func applyKeyOptions(cfg *emulator.Config, rights, hubs repeated) error {
	policies := map[string]*emulator.Policy{}
	get := func(flagName, name string) (*emulator.Policy, error) {
		if p, ok := policies[name]; ok {
			return p, nil
		}
		key, ok := cfg.Keys[name]
		if !ok {
			return nil, fmt.Errorf("--%s %q: no --key named %q", flagName, name, name)
		}
		p := &emulator.Policy{Name: name, Key: key}
		policies[name] = p
		delete(cfg.Keys, name)
		return p, nil
	}
	for _, r := range rights {
		name, list, ok := strings.Cut(r, "=")
		if !ok {
			return fmt.Errorf("--key-rights %q: want name=listen,send,manage", r)
		}
		p, err := get("key-rights", name)
		if err != nil {
			return err
		}
		if p.Rights, err = emulator.ParseRights(list); err != nil {
			return fmt.Errorf("--key-rights %q: %w", r, err)
		}
	}
	for _, h := range hubs {
		name, hubName, ok := strings.Cut(h, "=")
		if !ok || hubName == "" {
			return fmt.Errorf("--key-hub %q: want name=hub", h)
		}
		p, err := get("key-hub", name)
		if err != nil {
			return err
		}
		p.EventHub = hubName
	}
	for _, name := range slices.Sorted(maps.Keys(policies)) {
		cfg.Policies = append(cfg.Policies, *policies[name])
	}
	return nil
}
