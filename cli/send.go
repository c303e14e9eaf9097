package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/internal/progress"
	"github.com/ehsink/ehsink/internal/secret"
)

const sendUsage = `Usage: ehsink send [--connection CS | -c connectors.yaml [--connector NAME]] [--eventhub H]
                   [--file F | --body TEXT] [--keyed | --partition-key K | --partition N]
                   [--property K=V]... [--content-type T]
                   [--avro SCHEMA.avsc [--confluent] [--registry URL] [--registry-ca F]
                    [--schema-group G | --subject S] [--registry-user U]]
                   [--demo [--count N] [--rate R] [--keys K]]

Sends events to an event hub with the Azure SDK ProducerClient, batched up to
the hub's size limit. Events stream: memory stays a few MiB whatever the
number of events.

  Lines:  each line of --file (or of stdin) becomes one event, in order; an
          empty line is an event with an empty body (a tombstone), so N lines
          send N events. With --keyed each line is KEY<TAB>BODY: the event
          gets partition key KEY (order is kept per key), and "KEY<TAB>" alone
          is a tombstone of KEY.
  Body:   --body TEXT sends one event with body TEXT; --body '' an empty one.
  Properties: --property K=V (repeatable) sets an application property on
          every event: V is a boolean (true, false), an integer or a number
          as written, otherwise a string; quote it to keep a string
          (--property "n='7'").
  Avro:   --avro SCHEMA.avsc encodes each line, a JSON record (timestamps
          as RFC 3339 or Unix milliseconds, decimals as numbers, bytes as
          base64, a union's value as it is), as Avro of that schema, which
          it registers first: in Azure Schema Registry (--schema-group, the
          events' content type avro/binary+ID), or with --confluent in a
          Confluent-compatible registry (--subject, default HUB-value; the
          body framed as byte 0, the 4-byte id, the Avro value). The
          registry is --registry (default: the -c connector's
          source.registry, or https://NAMESPACE), reached with the
          connection string's key (Azure) or --registry-user and
          $EHSINK_REGISTRY_PASSWORD (Confluent; default: the connector's);
          --registry-ca trusts a PEM authority (the emulator's).
  Demo:   --demo generates order events (JSON, about 200 bytes) keyed by
          customer ID, --count of them (0: until Ctrl-C) at --rate per second
          (0: as fast as the hub takes them) over --keys customers.

Where to: --connection (or $EHSINK_CONNECTION) is an Event Hubs connection
string; or -c names a connectors.yaml and --connector one of its connectors
(optional when the file has one), whose source is used (its connection,
event hub and custom_endpoint). --eventhub names the
hub when the connection string has no EntityPath.

Exit status: 0 sent, 1 failed, 2 bad usage.
`

// runSend is `ehsink send`.
func runSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(ctx, "send", sendUsage)
	var t target
	f := newSendFlags(fs.FlagSet)
	t.flags(fs.FlagSet)
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	f.oneBody = setFlag(fs.FlagSet, "body")
	if problem := f.problem(fs.FlagSet); problem != "" {
		fmt.Fprintf(stderr, "ehsink send: %s\n", problem)
		fmt.Fprintln(stderr, "Run 'ehsink send --help' for usage.")
		return exitUsage
	}
	log := slog.New(slog.DiscardHandler)
	if *f.verbose {
		log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	in, closeIn, err := f.input()
	if err != nil {
		fmt.Fprintf(stderr, "ehsink send: %v\n", err)
		return exitFailure
	}
	defer closeIn()

	ep, code, err := t.resolve()
	if err != nil {
		fmt.Fprintf(stderr, "ehsink send: %v\n", err)
		return code
	}
	producer, err := ep.producer()
	if err != nil {
		fmt.Fprintf(stderr, "ehsink send: %v\n", err)
		return exitFailure
	}
	defer producer.Close(context.WithoutCancel(ctx))

	var bar *progress.Bar
	if !*f.verbose { // -v logs every batch; a redrawn line would tear it
		total := 0
		if *f.demo {
			total = *f.count
		}
		bar = progress.New(stderr, "events", total)
	}
	var n int
	if *f.demo {
		n, err = produce.Demo(ctx, producer, produce.DemoOptions{Count: *f.count, Rate: *f.rate, Keys: *f.keys, Logger: log, OnSent: bar.Add})
	} else {
		opts := produce.LinesOptions{PartitionKey: *f.key, PartitionID: *f.part, ContentType: *f.ctype, Properties: f.props, Logger: log, OnSent: bar.Add}
		if *f.avro.schema != "" {
			if err := f.avro.setup(ctx, ep, &opts); err != nil {
				bar.Finish()
				fmt.Fprintf(stderr, "ehsink send: --avro: %v\n", err)
				return exitFailure
			}
		}
		if *f.keyed {
			opts.KeySeparator = "\t"
		}
		n, err = produce.Lines(ctx, producer, in, opts)
	}
	bar.Finish()
	fmt.Fprintf(stdout, "sent %d events to event hub %q\n", n, ep.hub)
	if err != nil {
		fmt.Fprintf(stderr, "ehsink send: event hub %q: %v\n", ep.hub, err)
		return exitFailure
	}
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "ehsink send: interrupted")
		return exitFailure
	}
	return exitOK
}

// sendFlags are the flags of `ehsink send` but the target's.
type sendFlags struct {
	file, key, part, ctype, body *string
	keyed, demo, verbose         *bool
	count, keys                  *int
	rate                         *float64
	props                        properties
	oneBody                      bool // --body was given, perhaps empty
	avro                         *avroFlags
}

func newSendFlags(fs *flag.FlagSet) *sendFlags {
	f := &sendFlags{props: properties{}}
	f.file = fs.String("file", "", "read lines from `FILE` instead of stdin")
	f.key = fs.String("partition-key", "", "send every line with partition key `K`")
	f.part = fs.String("partition", "", "send every line to partition `N`")
	f.ctype = fs.String("content-type", "", "content type of line events, for example application/json")
	f.body = fs.String("body", "", "send one event with body `TEXT` ('' for an empty body) instead of reading lines")
	f.keyed = fs.Bool("keyed", false, "each line is KEY<TAB>BODY: send it with partition key KEY")
	f.demo = fs.Bool("demo", false, "generate demo order events instead of reading lines")
	f.count = fs.Int("count", 100, "with --demo: number of events (0: until interrupted)")
	f.rate = fs.Float64("rate", 0, "with --demo: events per second (0: as fast as possible)")
	f.keys = fs.Int("keys", 50, "with --demo: number of customers (partition keys)")
	f.verbose = fs.Bool("v", false, "log progress to stderr")
	fs.Var(f.props, "property", "set application property `K=V` on every event (repeatable)")
	f.avro = newAvroFlags(fs)
	return f
}

// problem says what is wrong with the combination of flags, or "".
func (f *sendFlags) problem(fs *flag.FlagSet) string {
	switch {
	case *f.key != "" && *f.part != "":
		return "--partition-key and --partition are mutually exclusive"
	case *f.demo && (*f.file != "" || *f.key != "" || *f.part != "" || f.oneBody || *f.keyed || len(f.props) > 0):
		return "--demo generates its own events and keys; it does not take --file, --body, --keyed, --property, --partition-key or --partition"
	case f.oneBody && (*f.file != "" || *f.keyed):
		return "--body sends one event; it does not take --file or --keyed"
	case f.oneBody && strings.ContainsAny(*f.body, "\r\n"):
		return "--body is one event: it must not hold a line break (use --file)"
	case *f.keyed && (*f.key != "" || *f.part != ""):
		return "--keyed takes the partition key of each line; it does not take --partition-key or --partition"
	case !*f.demo && (setFlag(fs, "count") || setFlag(fs, "rate") || setFlag(fs, "keys")):
		return "--count, --rate and --keys go with --demo"
	case f.avro.problem(*f.demo, *f.ctype != "") != "":
		return f.avro.problem(*f.demo, *f.ctype != "")
	case *f.count < 0 || *f.rate < 0 || *f.keys <= 0:
		return "--count and --rate must not be negative and --keys must be positive"
	}
	if *f.part != "" {
		if _, err := strconv.ParseUint(*f.part, 10, 32); err != nil {
			return fmt.Sprintf("--partition %q: want a partition ID such as 0", *f.part)
		}
	}
	return ""
}

// input returns the lines to send (--body, --file or stdin) and what
// closes them; nil with --demo.
func (f *sendFlags) input() (io.Reader, func(), error) {
	switch {
	case *f.demo:
		return nil, func() {}, nil
	case f.oneBody:
		return strings.NewReader(*f.body + "\n"), func() {}, nil // one line, even when empty
	case *f.file != "":
		file, err := os.Open(*f.file)
		if err != nil {
			return nil, nil, err
		}
		return file, func() { file.Close() }, nil
	}
	return os.Stdin, func() {}, nil
}

// properties is the --property flag: K=V pairs, V typed as it reads.
type properties map[string]any

func (p properties) String() string { return fmt.Sprint(map[string]any(p)) }

// Set adds one K=V: true and false are booleans, an integer is an int64, a
// number a float64, a quoted value ('7' or "7") the string inside, anything
// else a string; so a condition such as @properties.test == true reads it
// as written.
func (p properties) Set(kv string) error {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q: want K=V", kv)
	}
	p[k] = propertyValue(v)
	return nil
}

func propertyValue(v string) any {
	if len(v) >= 2 && (v[0] == '\'' || v[0] == '"') && v[len(v)-1] == v[0] {
		return v[1 : len(v)-1]
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	if i, err := strconv.ParseInt(v, 10, 64); err == nil {
		return i
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil && v != "" && !strings.ContainsAny(v, "xXnN") {
		return f // not Inf, NaN or hexadecimal floats, which read as words
	}
	return v
}

func setFlag(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// target is where a command connects: a connection string or a connector
// of a connectors.yaml file. Shared by send and checkpoints.
type target struct {
	connection string
	configPath string
	connector  string
	eventhub   string
}

func (t *target) flags(fs *flag.FlagSet) {
	fs.StringVar(&t.connection, "connection", "", "Event Hubs connection `STRING` (default $EHSINK_CONNECTION)")
	fs.StringVar(&t.configPath, "c", "", "connectors.yaml `FILE` to take the connection from")
	fs.StringVar(&t.connector, "connector", "", "connector `NAME` in the -c file (optional when it has one)")
	fs.StringVar(&t.eventhub, "eventhub", "", "event hub `NAME` (default: from the connection string or connector)")
}

// endpoint is a resolved event hub: how to reach it and, from a config
// file, the connector.
type endpoint struct {
	conn      secret.String
	namespace string
	hub       string
	spec      *connector.Spec // nil with --connection
	// customEndpoint is the connector's source.custom_endpoint, if any
	customEndpoint string
}

// resolve works out the endpoint; the int is the exit code on error.
func (t *target) resolve() (endpoint, int, error) {
	if t.connection == "" && t.configPath == "" {
		t.connection = os.Getenv("EHSINK_CONNECTION")
	}
	switch {
	case t.connector != "" && t.configPath == "":
		return endpoint{}, 2, errors.New("--connector needs -c connectors.yaml")
	case t.connection != "" && t.configPath != "":
		return endpoint{}, 2, errors.New("--connection and -c are mutually exclusive")
	case t.connection == "" && t.configPath == "":
		return endpoint{}, 2, errors.New("say where to connect: --connection CS (or $EHSINK_CONNECTION), or -c connectors.yaml --connector NAME")
	}
	var ep endpoint
	if t.connection != "" {
		ep.conn = secret.String(t.connection)
	} else {
		cfg, err := connector.Load(t.configPath, connector.LoadOptions{})
		if err != nil {
			return ep, 1, err
		}
		spec, err := pickConnector(cfg, t.connector)
		if err != nil {
			return ep, 2, err
		}
		ep.spec = spec
		ep.conn, ep.namespace, ep.hub = spec.Source.Connection, spec.Source.Namespace, spec.Source.EventHub
		ep.customEndpoint = spec.Source.CustomEndpoint
		if ep.conn.Reveal() == "emulator" {
			ep.conn, err = emulatorConnection(cfg, spec)
			if err != nil {
				return ep, 1, fmt.Errorf("connector %q: %w", spec.Name, err)
			}
		}
	}
	if t.eventhub != "" {
		ep.hub = t.eventhub
	}
	if ep.conn != "" {
		props, err := connstr.EventHubs(ep.conn.Reveal())
		if err != nil {
			return ep, 2, fmt.Errorf("connection string: %w", err)
		}
		ep.namespace = props.FullyQualifiedNamespace
		if props.EntityPath != nil && *props.EntityPath != "" {
			if ep.hub != "" && ep.hub != *props.EntityPath {
				return ep, 2, fmt.Errorf("--eventhub %q differs from the connection string's EntityPath %q", ep.hub, *props.EntityPath)
			}
			ep.hub = *props.EntityPath
		}
	}
	if ep.hub == "" {
		return ep, 2, errors.New("no event hub: give --eventhub or a connection string with EntityPath")
	}
	return ep, 0, nil
}

// pickConnector finds the named connector, or the only one.
func pickConnector(cfg *connector.Config, name string) (*connector.Spec, error) {
	if name == "" {
		if len(cfg.Connectors) == 1 {
			return &cfg.Connectors[0], nil
		}
		names := make([]string, len(cfg.Connectors))
		for i, c := range cfg.Connectors {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("the file has %d connectors %q: choose one with --connector", len(names), names)
	}
	for i := range cfg.Connectors {
		if cfg.Connectors[i].Name == name {
			return &cfg.Connectors[i], nil
		}
	}
	return nil, fmt.Errorf("no connector named %q in the file", name)
}

// emulatorConnection reaches the emulator of a config file from another
// process: possible only when it listens on a fixed address.
func emulatorConnection(cfg *connector.Config, spec *connector.Spec) (secret.String, error) {
	if cfg.Emulator == nil || cfg.Emulator.Listen == "" || isAnyPort(cfg.Emulator.Listen) {
		return "", errors.New(`source.connection is "emulator", which runs inside 'ehsink run'; give emulator.listen a fixed address (such as 127.0.0.1:5672) to reach it from here, or pass --connection`)
	}
	return secret.String(fmt.Sprintf("Endpoint=sb://%s;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=%s;UseDevelopmentEmulator=true",
		cfg.Emulator.Listen, spec.Source.EventHub)), nil
}

func isAnyPort(addr string) bool {
	return len(addr) >= 2 && addr[len(addr)-2:] == ":0"
}

// producer returns a producer client for ep. Retries are few: a command
// line tool should say what is wrong rather than wait.
func (ep endpoint) producer() (*azeventhubs.ProducerClient, error) {
	opts := &azeventhubs.ProducerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: 2}, CustomEndpoint: ep.customEndpoint}
	if ep.conn != "" {
		hub := ep.hub
		if props, err := connstr.EventHubs(ep.conn.Reveal()); err == nil && props.EntityPath != nil && *props.EntityPath != "" {
			hub = ""
		}
		p, err := azeventhubs.NewProducerClientFromConnectionString(ep.conn.Reveal(), hub, opts)
		if err != nil {
			return nil, fmt.Errorf("event hub %q: %w", ep.hub, err)
		}
		return p, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("event hub %q: credential: %w", ep.hub, err)
	}
	p, err := azeventhubs.NewProducerClient(ep.namespace, ep.hub, cred, opts)
	if err != nil {
		return nil, fmt.Errorf("event hub %q: %w", ep.hub, err)
	}
	return p, nil
}
