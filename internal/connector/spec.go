package connector

import (
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/source"
	"os"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
)

// Config is a whole connectors.yaml file.
type Config struct {
	// Connectors are run side by side, each with its own source, checkpoint
	// store, sink and error policy. Names must be unique.
	Connectors []Spec `yaml:"connectors"`
	// Emulator, when set, starts the built-in Event Hubs emulator in this
	// process; connectors reach it with `source.connection: emulator`.
	Emulator *EmulatorSpec `yaml:"emulator"`
	// DrainTimeout bounds the graceful stop after SIGINT/SIGTERM: batches in
	// flight are finished, flushed and checkpointed within it. If zero, 30s.
	DrainTimeout time.Duration `yaml:"drain_timeout"`
	// HTTP, when set, configures the operations HTTP API (metrics, probes,
	// status, pause and resume) that `ehsink run` serves.
	HTTP *HTTPSpec `yaml:"http"`
}

// HTTPSpec configures the operations HTTP API.
type HTTPSpec struct {
	// Listen is the address to serve on. If empty, 127.0.0.1:9464.
	Listen string `yaml:"listen"`
	// Token, when set, is the bearer token the routes that change
	// something (pause, resume, restart) require, on any listener. Write
	// it as a reference (`token: ${OPS_TOKEN}`) so that it comes from the
	// environment, e.g. a Kubernetes Secret.
	Token secret.String `yaml:"token"`
	// TokenFile, instead of Token, names a file holding the token (read
	// once at start, surrounding white space trimmed), e.g. a mounted
	// Kubernetes Secret. With neither set, the changing routes are served
	// only on a loopback listener and refused with 403 on any other.
	TokenFile string `yaml:"token_file"`
	// Pprof also serves Go's profiles under /debug/pprof/.
	Pprof bool `yaml:"pprof"`
	// LagInterval is how often the owned partitions' properties are read
	// to refresh their lag (each batch received refreshes it too). If
	// zero, 10s.
	LagInterval time.Duration `yaml:"lag_interval"`
}

// OpsToken returns the bearer token of the operations API: Token, or the
// content of TokenFile, or "" when neither is set. The file is read at each
// call, so `ehsink validate` finds a missing or empty file as `run` would.
func (h *HTTPSpec) OpsToken() (secret.String, error) {
	switch {
	case h == nil:
		return "", nil
	case h.Token != "" && h.TokenFile != "":
		return "", errors.New("token and token_file are both set: set one")
	case h.TokenFile != "":
		b, err := os.ReadFile(h.TokenFile)
		if err != nil {
			return "", fmt.Errorf("read token_file: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("token_file %s is empty", h.TokenFile)
		}
		return secret.String(tok), nil
	}
	return h.Token, nil
}

// EmulatorSpec configures the in-process emulator used for local runs and demos.
type EmulatorSpec struct {
	// Listen is the AMQP address. If empty, 127.0.0.1:0 (a free port).
	Listen string `yaml:"listen"`
	// Hubs maps event hub names to partition counts. If empty, {orders: 4}.
	Hubs map[string]int `yaml:"hubs"`
	// ConsumerGroups lists consumer groups besides $Default, for every hub.
	ConsumerGroups []string `yaml:"consumer_groups"`
	// DataDir keeps the emulator's events across restarts. If empty, memory only.
	DataDir string `yaml:"data_dir"`
	// SchemaRegistry is the address of the emulator's schema registries
	// (Azure Schema Registry and a Confluent-compatible one, over HTTPS
	// with the emulator's certificate). If empty, 127.0.0.1:0 when a
	// connector reading the emulator declares a registry without url, else
	// off.
	SchemaRegistry string `yaml:"schema_registry"`
	// Demo, when set, produces demo order events into a hub.
	Demo *DemoSpec `yaml:"demo"`
}

// DemoSpec configures the demo producer of the in-process emulator.
type DemoSpec struct {
	// EventHub receives the events. If empty, the first hub by name.
	EventHub string `yaml:"eventhub"`
	// Rate is events per second. If zero, 20.
	Rate float64 `yaml:"rate"`
	// Count stops the producer after that many events. If zero, no limit.
	Count int `yaml:"count"`
	// Keys is the number of distinct partition keys (customers). If zero, 50.
	Keys int `yaml:"keys"`
}

// Spec is one connector: an event hub read by a consumer group, written to one sink.
type Spec struct {
	// Name identifies the connector in logs, metrics, errors and sink state. Required.
	Name string `yaml:"name"`
	// Source says where events come from.
	Source SourceSpec `yaml:"source"`
	// Checkpoint says where the connector's checkpoints and ownership leases live.
	Checkpoint CheckpointSpec `yaml:"checkpoint"`
	// Filter, when set, drops events before the sink by a condition on
	// their body or metadata.
	Filter *FilterSpec `yaml:"filter"`
	// Sink is the destination.
	Sink SinkSpec `yaml:"sink"`
	// Errors is the error policy.
	Errors ErrorsSpec `yaml:"errors"`
}

// SourceSpec configures the Event Hubs source.
type SourceSpec struct {
	// Connection is an Event Hubs connection string (with or without
	// EntityPath), or "emulator" for the in-process emulator. Either
	// Connection or Namespace is required.
	Connection secret.String `yaml:"connection"`
	// Namespace is the fully qualified namespace (NAME.servicebus.windows.net),
	// used with Credential instead of a connection string.
	Namespace string `yaml:"namespace"`
	// Credential is the Entra ID credential used with Namespace; only
	// "default" (DefaultAzureCredential) is supported. If empty, "default".
	Credential string `yaml:"credential"`
	// EventHub is the event hub name. Required unless the connection string has EntityPath.
	EventHub string `yaml:"eventhub"`
	// Format is the format of the event bodies: json or avro (decoded
	// with the schemas of Registry, then mapped as JSON is). If empty,
	// json.
	Format string `yaml:"format"`
	// Registry is the schema registry of Avro events; required with
	// format avro.
	Registry *RegistrySpec `yaml:"registry"`
	// Settings are the source's settings (consumer_group, start,
	// start_partitions, on_invalid_checkpoint, batch, prefetch,
	// connections, load_balancing): package source owns their keys,
	// defaults and checks.
	source.Settings `yaml:",inline"`
}

// CheckpointSpec configures the checkpoint store and policy. Exactly one of
// Blob and File may be set; if neither is, a file store under
// .ehsink/checkpoints is used.
type CheckpointSpec struct {
	// Blob stores checkpoints in Azure Blob Storage, in the layout every Azure SDK uses.
	Blob *BlobCheckpointSpec `yaml:"blob"`
	// File stores checkpoints in a local directory, in the same layout.
	File *FileCheckpointSpec `yaml:"file"`
	// EveryEvents checkpoints after a flush once at least this many events
	// were committed since the last checkpoint (1: after every flush). If
	// zero, only EveryInterval counts.
	EveryEvents int `yaml:"every_events"`
	// EveryInterval checkpoints after a flush once this long has passed
	// since the last checkpoint (or EveryEvents is reached first). If
	// zero, 1s. Checkpoints are always written when a partition closes,
	// goes quiet (an empty batch) and on shutdown.
	EveryInterval time.Duration `yaml:"every_interval"`
}

// BlobCheckpointSpec configures Blob Storage checkpoints.
type BlobCheckpointSpec struct {
	// Connection is a storage connection string. Either it or AccountURL is required.
	Connection secret.String `yaml:"connection"`
	// AccountURL is https://ACCOUNT.blob.core.windows.net, used with
	// DefaultAzureCredential.
	AccountURL string `yaml:"account_url"`
	// Container holds the blobs; it is created if missing. Required.
	Container string `yaml:"container"`
}

// FileCheckpointSpec configures local file checkpoints.
type FileCheckpointSpec struct {
	// Dir is the root directory. If empty, .ehsink/checkpoints.
	Dir string `yaml:"dir"`
}

// SinkSpec is the connector's `sink:` block. Type selects a registered sink;
// the other keys are decoded into the config struct of that sink's driver.
type SinkSpec struct {
	// Type is the registered sink name (stdout, postgres, parquet, or a custom one). Required.
	Type string `yaml:"type"`
	// Config is the decoded, validated sink config (what the driver's
	// NewConfig returned), set by the loader.
	Config any `yaml:"-"`
	// Auto, when set, is the block's `columns: auto`: the loader derives
	// Config's columns from the reader schema, or leaves the metadata
	// columns there until the connector starts and asks the registry.
	Auto *AutoColumns `yaml:"-"`
}

// ErrorsSpec is the connector's error policy.
type ErrorsSpec struct {
	// Retry bounds retries of transient failures (sink unreachable, throttling).
	Retry RetrySpec `yaml:"retry"`
	// Tolerance is none (an event that cannot be written stops the
	// connector) or all (it goes to the dead-letter path with its reason).
	// If empty, all.
	Tolerance string `yaml:"tolerance"`
	// DeadLetter is where dead letters go when the sink does not store them itself.
	DeadLetter DeadLetterSpec `yaml:"dead_letter"`
	// CircuitBreaker stops the connector from receiving while its sink fails.
	CircuitBreaker CircuitBreakerSpec `yaml:"circuit_breaker"`
	// SinkTimeout bounds how long a sink call (open, write, flush,
	// dead-letter) may go without an answer from its destination (a sink
	// that does not report answers, sinks.Progress, is measured from the
	// call's start). A call silent that long is a transient sink failure:
	// retried, counted by the circuit breaker, reported by readiness. It
	// is what notices a sink that stopped answering without closing the
	// connection (a half-open connection, a stuck server), while a slow
	// one that keeps answering is let finish. Keep it above the longest
	// silence of a healthy call. If zero, 15s, or a quarter of
	// load_balancing.ownership_expiration when that is shorter.
	SinkTimeout time.Duration `yaml:"sink_timeout"`
}

// CircuitBreakerSpec configures a connector's circuit breaker on sink
// failures: after Failures transient failures in a row (across all its
// partitions) no partition receives, and sink calls wait; after
// ProbeInterval one call probes the sink, and its success closes the
// breaker. Each failed probe doubles the wait, up to MaxProbeInterval.
type CircuitBreakerSpec struct {
	// Failures is how many transient sink failures in a row open the
	// breaker. If zero, 5.
	Failures int `yaml:"failures"`
	// ProbeInterval is how long the breaker stays open before the first
	// probe. If zero, 1s.
	ProbeInterval time.Duration `yaml:"probe_interval"`
	// MaxProbeInterval caps the wait between probes. If zero, 1m.
	MaxProbeInterval time.Duration `yaml:"max_probe_interval"`
}

// RetrySpec is a capped exponential backoff with jitter.
type RetrySpec struct {
	// InitialBackoff is the first wait. If zero, 200ms.
	InitialBackoff time.Duration `yaml:"initial_backoff"`
	// MaxBackoff caps the wait. If zero, 30s.
	MaxBackoff time.Duration `yaml:"max_backoff"`
	// MaxAttempts gives up after that many attempts. If zero, retry until stopped.
	MaxAttempts int `yaml:"max_attempts"`
}

// DeadLetterSpec configures the runner's dead-letter path.
type DeadLetterSpec struct {
	// Dir receives JSON lines files of dead letters, one file per partition.
	// If empty, .ehsink/dead-letters/CONNECTOR.
	Dir string `yaml:"dir"`
}
