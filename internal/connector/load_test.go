package connector

import (
	"bytes"
	"context"
	"errors"
	"github.com/ehsink/ehsink/source"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
)

// fakeConfig is the config of the test-only "fake" sink.
type fakeConfig struct {
	DSN        secret.String     `yaml:"dsn"`
	Table      string            `yaml:"table"`
	Mode       string            `yaml:"mode"`
	BatchBytes config.ByteSize   `yaml:"batch_bytes"`
	Columns    map[string]string `yaml:"columns"`
}

func (c *fakeConfig) Validate() error {
	var errs []error
	if c.Table == "" {
		errs = append(errs, &sinks.FieldError{Field: "table", Err: errors.New("required")})
	}
	if c.Mode != "append" && c.Mode != "upsert" {
		errs = append(errs, &sinks.FieldError{Field: "mode", Err: errors.New("must be append or upsert")})
	}
	return errors.Join(errs...)
}

type fakeDriver struct{}

func (fakeDriver) NewConfig() any { return &fakeConfig{Mode: "append"} }
func (fakeDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return nil, errors.New("fake sink: not for running")
}

// testRegistry holds fake and nullsink, never the global registry's sinks.
func testRegistry() *sinks.Registry {
	var r sinks.Registry
	r.Register("fake", fakeDriver{})
	r.Register("nullsink", fakeDriver{})
	return &r
}

const (
	testConn  = "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=listen;SharedAccessKey=EHKEYSECRET;EntityPath=payments"
	testDSN   = "postgres://app:PGPASSWORD@db:5432/app"
	testStore = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=STORAGEKEY00;EndpointSuffix=core.windows.net"
)

// testEnv is the environment of the loader tests: variables for ${VAR} and
// EHSINK_ overrides, never the process environment.
func testEnv(extra map[string]string) LoadOptions {
	env := map[string]string{
		"PG_DSN":              testDSN,
		"EVENTHUB_CONNECTION": testConn,
		"STORAGE_CONNECTION":  testStore,
	}
	for k, v := range extra {
		env[k] = v
	}
	return LoadOptions{
		Registry: testRegistry(),
		Getenv:   func(k string) string { return env[k] },
		Environ: func() []string {
			var out []string
			for k, v := range env {
				out = append(out, k+"="+v)
			}
			return out
		},
	}
}

func TestLoadExample(t *testing.T) {
	c, err := Load("testdata/connectors.yaml", testEnv(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if c.DrainTimeout != 10*time.Second {
		t.Errorf("drain_timeout = %s", c.DrainTimeout)
	}
	if e := c.Emulator; e == nil || e.Listen != defaultEmulatorListen || e.Demo == nil || e.Demo.EventHub != "orders" || e.Demo.Rate != 5 || e.Demo.Keys != defaultDemoKeys {
		t.Errorf("emulator = %+v", c.Emulator)
	}
	if len(c.Connectors) != 2 {
		t.Fatalf("%d connectors", len(c.Connectors))
	}
	o := c.Connectors[0]
	// Prefetch stays 0: the source spreads it over the hub's partitions.
	if o.Source.Batch != (source.Batch{MaxEvents: 200, MaxWait: 500 * time.Millisecond, MinEvents: 1}) ||
		o.Source.ConsumerGroup != "$Default" || o.Source.Prefetch != 0 ||
		!reflect.DeepEqual(o.Source.StartPartitions, map[string]string{"0": "latest", "1": "seq:42"}) {
		t.Errorf("orders source = %+v", o.Source)
	}
	if o.Checkpoint.File == nil || o.Checkpoint.File.Dir != ".ehsink/state/checkpoints" {
		t.Errorf("orders checkpoint = %+v", o.Checkpoint)
	}
	if o.Errors.Retry != (RetrySpec{InitialBackoff: defaultInitialBackoff, MaxBackoff: 10 * time.Second}) ||
		o.Errors.Tolerance != "none" || o.Errors.DeadLetter.Dir != filepath.Join(".ehsink/dead-letters", "orders-to-fake") {
		t.Errorf("orders errors = %+v", o.Errors)
	}
	wantSink := &fakeConfig{DSN: testDSN, Table: "orders", Mode: "append", BatchBytes: 64 * config.MiB,
		Columns: map[string]string{"order_id": "$.order_id", "amount": "$.amount"}}
	if o.Sink.Type != "fake" || !reflect.DeepEqual(o.Sink.Config, wantSink) {
		t.Errorf("orders sink = %s %#v", o.Sink.Type, o.Sink.Config)
	}
	p := c.Connectors[1]
	if p.Source.Connection.Reveal() != testConn || p.Source.EventHub != "" || p.Source.LoadBalancing.Strategy != "greedy" {
		t.Errorf("payments source = %+v", p.Source)
	}
	if p.Checkpoint.File != nil || p.Checkpoint.Blob == nil || p.Checkpoint.Blob.Connection.Reveal() != testStore {
		t.Errorf("payments checkpoint = %+v", p.Checkpoint)
	}
	if got := p.Sink.Config.(*fakeConfig); got.Mode != "upsert" || got.Table != "payments" {
		t.Errorf("payments sink = %+v", got)
	}
}

func TestLoadFiveMistakes(t *testing.T) {
	_, err := Load("testdata/five-mistakes.yaml", testEnv(nil))
	want := map[string]string{
		"connectors[0].source.batch.max_evnts": "unknown key (did you mean max_events?)",
		"connectors[0].source.eventhub":        "required",
		"connectors[1].source.batch.max_wait":  `"5 minutes" is not a duration`,
		"connectors[1].sink.type":              `unknown sink "pg" (known: fake, nullsink)`,
		"connectors[2].name":                   `duplicate connector name "orders"`,
	}
	assertProblems(t, err, want)
}

// assertProblems checks that err has exactly the problems in want (path ->
// message substring).
func assertProblems(t *testing.T, err error, want map[string]string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want problems at %v", slices.Sorted(mapsKeys(want)))
	}
	got := map[string][]string{}
	for _, e := range config.Errors(err) {
		got[e.Path] = append(got[e.Path], e.Err.Error())
	}
	for path, msg := range want {
		msgs, ok := got[path]
		if !ok {
			t.Errorf("no problem at %s; got:\n%v", path, err)
			continue
		}
		if len(msgs) != 1 || !strings.Contains(msgs[0], msg) {
			t.Errorf("%s: %q, want one containing %q", path, msgs, msg)
		}
		if !strings.Contains(err.Error(), path+": ") {
			t.Errorf("message does not name %s:\n%v", path, err)
		}
	}
	for path, msgs := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("unexpected problem at %s: %q", path, msgs)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// loadYAML writes text to a file and loads it.
func loadYAML(t *testing.T, text string, opts LoadOptions) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "connectors.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path, opts)
}

const minimal = `
emulator: {}
connectors:
  - name: a
    source: {connection: emulator, eventhub: orders}
    sink: {type: fake, table: t}
`

func TestLoadValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want map[string]string
	}{
		{"no connectors", `drain_timeout: 1s`, map[string]string{"connectors": "at least one connector"}},
		{"nothing required set", `
connectors:
  - source: {}
    sink: {}
`, map[string]string{
			"connectors[0].name":              "required",
			"connectors[0].source.connection": "required",
			"connectors[0].source.eventhub":   "required",
			"connectors[0].sink.type":         "required",
		}},
		{"emulator without block", `
connectors:
  - name: a
    source: {connection: emulator, eventhub: orders}
    sink: {type: fake, table: t}
`, map[string]string{"connectors[0].source.connection": "needs an emulator: block"}},
		{"circuit breaker", strings.Replace(minimal, "    sink:", "    errors: {sink_timeout: -1s, circuit_breaker: {failures: -1, probe_interval: 5s, max_probe_interval: 1s}}\n    sink:", 1), map[string]string{
			"connectors[0].errors.circuit_breaker.failures":           "must not be negative",
			"connectors[0].errors.circuit_breaker.max_probe_interval": "less than probe_interval",
			"connectors[0].errors.sink_timeout":                       "must be positive",
		}},
		{"emulator hub unknown", strings.Replace(minimal, "eventhub: orders", "eventhub: nope", 1),
			map[string]string{"connectors[0].source.eventhub": `"nope" is not a hub of the emulator (hubs: orders)`}},
		{"bad enums", `
emulator: {}
connectors:
  - name: a
    source:
      connection: emulator
      eventhub: orders
      start: yesterday
      start_partitions: {"3": "seq:-1"}
      on_invalid_checkpoint: ignore
      load_balancing: {strategy: random}
    sink: {type: fake, table: t}
    errors: {tolerance: some}
`, map[string]string{
			"connectors[0].source.start":                   `"yesterday": use earliest, latest`,
			"connectors[0].source.start_partitions.3":      "seq:N with N >= 0",
			"connectors[0].source.on_invalid_checkpoint":   "must be one of fail, earliest, latest",
			"connectors[0].source.load_balancing.strategy": "must be one of balanced, greedy",
			"connectors[0].errors.tolerance":               "must be one of none, all",
		}},
		{"timing", `
emulator: {}
connectors:
  - name: a
    source:
      connection: emulator
      eventhub: orders
      batch: {max_wait: 2m}
      load_balancing: {update_interval: 20s, ownership_expiration: 30s}
    sink: {type: fake, table: t}
    errors: {retry: {initial_backoff: 1m, max_backoff: 1s}}
`, map[string]string{
			"connectors[0].source.load_balancing.ownership_expiration": "30s is less than twice update_interval (20s)",
			"connectors[0].source.batch.max_wait":                      "2m0s is longer than load_balancing.ownership_expiration (30s)",
			"connectors[0].errors.retry.max_backoff":                   "1s is less than initial_backoff (1m0s)",
		}},
		{"connections out of range", strings.Replace(minimal, "eventhub: orders", "eventhub: orders, connections: -2", 1),
			map[string]string{"connectors[0].source.connections": "must be between 0 (one per partition up to the number of cores) and 64, got -2"}},
		{"max_wait over default expiration", strings.Replace(minimal, "eventhub: orders", "eventhub: orders, batch: {max_wait: 61s}", 1),
			map[string]string{"connectors[0].source.batch.max_wait": "longer than load_balancing.ownership_expiration (1m0s)"}},
		{"both checkpoint stores", strings.Replace(minimal, "    sink:", `    checkpoint:
      file: {dir: x}
      blob: {account_url: "https://acct.blob.core.windows.net", container: Bad_Name}
    sink:`, 1), map[string]string{
			"connectors[0].checkpoint":                "set blob or file, not both",
			"connectors[0].checkpoint.blob.container": "a container name has 3 to 63",
		}},
		{"blob without connection", strings.Replace(minimal, "    sink:", `    checkpoint: {blob: {container: cps}}
    sink:`, 1), map[string]string{"connectors[0].checkpoint.blob.connection": "required"}},
		{"connection and namespace", strings.Replace(minimal, "connection: emulator", "connection: emulator, namespace: ns.servicebus.windows.net, credential: mine", 1),
			map[string]string{
				"connectors[0].source.namespace":  "not both",
				"connectors[0].source.credential": `"mine": only "default"`,
			}},
		{"namespace not qualified", strings.Replace(minimal, "connection: emulator", "namespace: ns", 1),
			map[string]string{"connectors[0].source.namespace": "fully qualified"}},
		{"entity path mismatch", strings.Replace(minimal, "connection: emulator, eventhub: orders", `connection: "${EVENTHUB_CONNECTION}", eventhub: orders`, 1),
			map[string]string{"connectors[0].source.eventhub": `differs from the connection string's EntityPath "payments"`}},
		{"sink validator paths", strings.Replace(minimal, "table: t", "mode: merge", 1),
			map[string]string{"connectors[0].sink.table": "required", "connectors[0].sink.mode": "must be append or upsert"}},
		{"sink decode errors skip the validator", strings.Replace(minimal, "table: t", "tabel: t, batch_bytes: lots", 1),
			map[string]string{"connectors[0].sink.tabel": "did you mean table?", "connectors[0].sink.batch_bytes": "is not a size"}},
		{"bad names", `
emulator: {listen: nowhere, hubs: {orders: 0}, demo: {eventhub: nope}}
connectors:
  - name: "a b"
    source: {connection: emulator, eventhub: orders}
    sink: {type: fake, table: t}
`, map[string]string{
			"connectors[0].name":     `"a b": use letters`,
			"emulator.listen":        "write HOST:PORT",
			"emulator.hubs.orders":   "0 partitions",
			"emulator.demo.eventhub": `"nope" is not one of the emulator's hubs`,
		}},
		{"missing variable", strings.Replace(minimal, "table: t", `table: t, dsn: "${NOT_SET}"`, 1),
			map[string]string{"connectors[0].sink.dsn": "environment variable NOT_SET is not set"}},
		{"near misses get suggestions", strings.Replace(strings.Replace(minimal, "type: fake", "type: fak", 1), "eventhub: orders", "eventhub: orders, load_balancing: {strategy: ballanced}", 1),
			map[string]string{
				"connectors[0].sink.type":                      `unknown sink "fak" (did you mean fake? known: fake, nullsink)`,
				"connectors[0].source.load_balancing.strategy": "(did you mean balanced?)",
			}},
		{"top-level typo", "drain_timeot: 1s\n" + minimal,
			map[string]string{"drain_timeot": "did you mean drain_timeout?"}},
		{"sink not a map", strings.Replace(minimal, "sink: {type: fake, table: t}", "sink: fake", 1),
			map[string]string{"connectors[0].sink": "expected a map of keys, got the string \"fake\"", "connectors[0].sink.type": "required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadYAML(t, tt.yaml, testEnv(nil))
			assertProblems(t, err, tt.want)
		})
	}
}

func TestLoadMinimalDefaults(t *testing.T) {
	c, err := loadYAML(t, minimal, testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Connectors[0]
	want := SourceSpec{Connection: "emulator", EventHub: "orders", Settings: source.Settings{ConsumerGroup: "$Default", Start: "earliest", OnInvalidCheckpoint: "fail", Batch: source.Batch{MaxEvents: 2000, MaxWait: time.Second, MinEvents: 1}, LoadBalancing: source.LoadBalancing{Strategy: "balanced", UpdateInterval: 10 * time.Second, OwnershipExpiration: time.Minute}}}
	if !reflect.DeepEqual(s.Source, want) {
		t.Errorf("source:\n got %+v\nwant %+v", s.Source, want)
	}
	if s.Checkpoint.File == nil || s.Checkpoint.File.Dir != ".ehsink/checkpoints" || s.Checkpoint.Blob != nil {
		t.Errorf("checkpoint = %+v", s.Checkpoint)
	}
	if s.Checkpoint.EveryInterval != 20*time.Second || s.Checkpoint.EveryEvents != 0 {
		t.Errorf("checkpoint policy: every %s or %d events, want every 20s by default", s.Checkpoint.EveryInterval, s.Checkpoint.EveryEvents)
	}
	// Each zero has one meaning: every_events alone keeps the 20s interval
	// (whichever comes first).
	c2, err := loadYAML(t, strings.Replace(minimal, "    sink:", "    checkpoint: {every_events: 1}\n    sink:", 1), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cp := c2.Connectors[0].Checkpoint; cp.EveryEvents != 1 || cp.EveryInterval != 20*time.Second {
		t.Errorf("checkpoint policy with every_events: 1: every %s or %d events, want every event or 20s", cp.EveryInterval, cp.EveryEvents)
	}
	// Under a short ownership expiration the interval is a third of it.
	c3, err := loadYAML(t, strings.Replace(minimal, "eventhub: orders}", "eventhub: orders, load_balancing: {update_interval: 2s, ownership_expiration: 9s}}", 1), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cp := c3.Connectors[0].Checkpoint; cp.EveryInterval != 3*time.Second {
		t.Errorf("checkpoint interval under a 9s expiration: %s, want 3s", cp.EveryInterval)
	}
	if s.Errors.SinkTimeout != 15*time.Second {
		t.Errorf("errors.sink_timeout = %s, want 15s by default", s.Errors.SinkTimeout)
	}
	// Under a short ownership expiration, a quarter of it: noticing a sink
	// that answers nothing must leave room, within 2 × the expiration, for
	// the hand-over.
	c3, err = loadYAML(t, strings.Replace(minimal, "eventhub: orders}", "eventhub: orders, load_balancing: {update_interval: 2s, ownership_expiration: 10s}}", 1), testEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c3.Connectors[0].Errors.SinkTimeout; got != 2500*time.Millisecond {
		t.Errorf("errors.sink_timeout = %s under ownership_expiration 10s, want 2.5s by default", got)
	}
	if c.DrainTimeout != 30*time.Second || !reflect.DeepEqual(c.Emulator.Hubs, map[string]int{"orders": 4}) {
		t.Errorf("drain %s, hubs %v", c.DrainTimeout, c.Emulator.Hubs)
	}
}

func TestLoadFileErrors(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml"), testEnv(nil)); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := loadYAML(t, "connectors: [\n", testEnv(nil)); err == nil {
		t.Error("bad YAML: no error")
	}
}

func TestValidateHandBuilt(t *testing.T) {
	// A hand-built config is valid with its zero fields meaning defaults,
	// and Validate does not change it.
	c := &Config{
		Emulator:   &EmulatorSpec{},
		Connectors: []Spec{{Name: "a", Source: SourceSpec{Connection: "emulator", EventHub: "orders"}, Sink: SinkSpec{Type: "fake"}}},
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if c.DrainTimeout != 0 || c.Connectors[0].Source.Batch.MaxEvents != 0 || c.Emulator.Hubs != nil {
		t.Errorf("Validate changed the config: %+v", c)
	}
	c.Connectors[0].Sink.Config = &fakeConfig{}
	assertProblems(t, c.Validate(), map[string]string{
		"connectors[0].sink.table": "required",
		"connectors[0].sink.mode":  "must be append or upsert",
	})
}

func TestPrintRedactsAndRoundTrips(t *testing.T) {
	opts := testEnv(nil)
	c, err := Load("testdata/connectors.yaml", opts)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := c.Print(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, leak := range []string{"EHKEYSECRET", "PGPASSWORD", "STORAGEKEY", testConn, testDSN, testStore} {
		if strings.Contains(out, leak) {
			t.Errorf("Print shows %q:\n%s", leak, out)
		}
	}
	for _, want := range []string{"connection: '***'", "connection: emulator", "dsn: '***'", "type: fake", "batch_bytes: 64MiB", "max_wait: 500ms", "prefetch: 0", "consumer_group: $Default"} {
		if !strings.Contains(out, want) {
			t.Errorf("Print lacks %q:\n%s", want, out)
		}
	}
	// The printed config loads back to the same config once its secrets
	// (*** now) are given values again: one value that is both an Event
	// Hubs and a storage connection string (each parser skips the
	// other's keys).
	secretValue := testConn + ";AccountName=acct;AccountKey=STORAGEKEY00"
	opts = testEnv(map[string]string{"SECRET": secretValue})
	back, err := loadYAML(t, strings.ReplaceAll(out, "'***'", `"${SECRET}"`), opts)
	if err != nil {
		t.Fatalf("Load(Print): %v\n%s", err, out)
	}
	var again bytes.Buffer
	if err := back.Print(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != out {
		t.Errorf("Print(Load(Print(c))) differs from Print(c):\n%s\n----\n%s", again.String(), out)
	}
	if got := back.Connectors[0].Sink.Config.(*fakeConfig); got.DSN.Reveal() != secretValue || got.BatchBytes != 64*config.MiB {
		t.Errorf("sink config after round trip: %+v", got)
	}
}

// TestLoadOpsToken: the operations token comes from the environment
// (http.token: ${VAR}, or EHSINK_HTTP__TOKEN) or from a file
// (http.token_file); both at once, a missing file or an empty one are
// refused at load, as `run` would refuse them; Print never shows it.
func TestLoadOpsToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("  file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, http string
		env        map[string]string
		want       string // the token, or the problem when it starts with "!"
	}{
		{"none", `http: {listen: "0.0.0.0:9464"}`, nil, ""},
		{"from a variable", `http: {token: "${OPS_TOKEN}"}`, map[string]string{"OPS_TOKEN": "env-token"}, "env-token"},
		{"from an override", `http: {listen: "0.0.0.0:9464"}`, map[string]string{"EHSINK_HTTP__TOKEN": "override-token"}, "override-token"},
		{"from a file", `http: {token_file: "` + file + `"}`, nil, "file-token"},
		{"both", `http: {token: abc, token_file: "` + file + `"}`, nil, "!http.token_file: token and token_file are both set"},
		{"missing file", `http: {token_file: "` + filepath.Join(dir, "nope") + `"}`, nil, "!http.token_file: read token_file"},
		{"empty file", `http: {token_file: "` + empty + `"}`, nil, "!http.token_file: token_file " + empty + " is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadYAML(t, tt.http+"\n"+minimal, testEnv(tt.env))
			if strings.HasPrefix(tt.want, "!") {
				if err == nil || !strings.Contains(err.Error(), tt.want[1:]) {
					t.Fatalf("Load: %v, want %q", err, tt.want[1:])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.HTTP.OpsToken()
			if err != nil || got.Reveal() != tt.want {
				t.Fatalf("OpsToken() = %q, %v; want %q", got.Reveal(), err, tt.want)
			}
			var buf bytes.Buffer
			if err := c.Print(&buf); err != nil {
				t.Fatal(err)
			}
			if tt.want != "" && strings.Contains(buf.String(), tt.want) {
				t.Errorf("Print shows the token:\n%s", buf.String())
			}
		})
	}
}
