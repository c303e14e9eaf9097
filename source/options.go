package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
)

// Defaults applied to zero fields of [Options].
const (
	defaultMaxEvents           = 2000
	defaultPrefetch            = 2000
	defaultMaxWait             = time.Second
	defaultUpdateInterval      = 10 * time.Second
	defaultOwnershipExpiration = time.Minute
)

// maxPrefetch is the largest Prefetch the SDK accepts, and the largest
// MaxEvents when prefetch is disabled.
const maxPrefetch = 5000

// Options configures a [Source]. Zero values take the documented defaults;
// [Options.Validate] reports every problem at once.
type Options struct {
	// Connection is an Event Hubs connection string, with or without
	// EntityPath. Either Connection or Namespace+Credential is required.
	Connection secret.String
	// Namespace is the fully qualified namespace (NAME.servicebus.windows.net),
	// used with Credential when Connection is empty.
	Namespace string
	// Credential authenticates to Namespace (for example
	// azidentity.NewDefaultAzureCredential).
	Credential azcore.TokenCredential
	// EventHub is the event hub name. Required unless Connection has an
	// EntityPath; if both are set they must agree.
	EventHub string
	// ConsumerGroup is the consumer group. If empty, $Default.
	ConsumerGroup string
	// Start is where a partition with no checkpoint and no sink watermark
	// starts: "earliest", "latest", an RFC 3339 enqueued time (inclusive) or
	// "seq:N" (the event with sequence number N, inclusive). If empty, earliest.
	Start string
	// StartPartitions overrides Start per partition ID.
	StartPartitions map[string]string
	// OnInvalidCheckpoint is what to do when a resume position points past the
	// partition's last event or before its retained start: "fail" (Run
	// returns ErrInvalidCheckpoint), "earliest" or "latest". If empty, fail.
	OnInvalidCheckpoint string
	// MaxEvents is the most events one Receive returns. If zero, 2000.
	MaxEvents int
	// MaxWait is the longest one Receive waits for MaxEvents. If zero, 1s.
	MaxWait time.Duration
	// Prefetch is the number of events the SDK keeps ready per partition. If
	// zero, 2000; negative disables prefetch (MaxEvents is then at most 5000).
	Prefetch int
	// Connections is the number of AMQP connections partitions are
	// received on (see connections.go). If zero, one per partition up to
	// GOMAXPROCS; 1 receives every partition on the processor's own
	// connection.
	Connections int
	// Strategy is the SDK load-balancing strategy, "balanced" or "greedy".
	// If empty, balanced.
	Strategy string
	// UpdateInterval is how often ownership is renewed and rebalanced. If zero, 10s.
	UpdateInterval time.Duration
	// OwnershipExpiration is how long an unrenewed ownership lasts. If zero,
	// 60s. It must be at least twice UpdateInterval, and MaxWait must not
	// exceed it.
	OwnershipExpiration time.Duration
	// Store keeps checkpoints and ownership leases. Required.
	Store azeventhubs.CheckpointStore
	// Watermark, when set, returns the sink's committed position for a
	// partition (nil: nothing committed). The resume position of a newly
	// owned partition is the later of it and the checkpoint.
	Watermark func(ctx context.Context, partition string) (*sinks.Position, error)
	// Claim, when set, is used instead of Watermark: called once for each
	// claim of a partition, it returns the sink's committed position for
	// the partition together with what it opened to read it (the sink's
	// writer for the partition), still open. The partition's handler takes
	// it with [Partition.TakeOpened] and runs the partition with it, so the
	// sink is opened once per claim and the position the partition resumes
	// from is the one that writer holds. What no handler takes (the claim
	// ended first, or the resume position could not be worked out) is
	// closed by the source.
	Claim func(ctx context.Context, partition string) (*sinks.Position, Opened, error)
	// InstanceID is this replica's owner ID in the ownership leases and its
	// receiver name on the service. If empty, a random ID.
	InstanceID string
	// HoldClaims, when set, is asked before each ownership claim of the
	// processor: while it returns true, the source claims no partition it
	// does not own already (its own leases are still renewed). The
	// connector holds claims while its sink's circuit breaker is open, so
	// that a replica that cannot reach its sink leaves the partitions to
	// one that can, instead of claiming them only to give them up.
	HoldClaims func() bool
	// OnHeal, when set, is called once for each heal of the watchdog, with
	// the reason (healUnread, healSilent, HealProcessorFailed), for metrics.
	OnHeal func(reason string)
	// Logger receives claims, losses and resume decisions. If nil, logs are discarded.
	Logger *slog.Logger

	// clientRetry replaces the SDK's retry policy of the long-lived client
	// (tests: an injected failure reaches the source at once instead of
	// after the SDK's retries, seconds apart).
	clientRetry azeventhubs.RetryOptions
}

// Opened is what [Options.Claim] opened for a claimed partition: the sink's
// writer, as far as the source is concerned something to close when no
// handler takes it.
type Opened interface {
	// Close releases what was opened, abandoning anything not committed.
	Close(ctx context.Context) error
}

// WithDefaults returns a copy of o with the documented default of every
// zero setting applied.
func (o Options) WithDefaults() Options {
	if o.ConsumerGroup == "" {
		o.ConsumerGroup = azeventhubs.DefaultConsumerGroup
	}
	if o.Start == "" {
		o.Start = "earliest"
	}
	if o.OnInvalidCheckpoint == "" {
		o.OnInvalidCheckpoint = string(policyFail)
	}
	if o.MaxEvents == 0 {
		o.MaxEvents = defaultMaxEvents
	}
	if o.MaxWait == 0 {
		o.MaxWait = defaultMaxWait
	}
	if o.Prefetch == 0 {
		o.Prefetch = defaultPrefetch
	}
	if o.Strategy == "" {
		o.Strategy = string(azeventhubs.ProcessorStrategyBalanced)
	}
	if o.UpdateInterval == 0 {
		o.UpdateInterval = defaultUpdateInterval
	}
	if o.OwnershipExpiration == 0 {
		o.OwnershipExpiration = defaultOwnershipExpiration
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports every problem of o (after defaults), joined: the
// settings' (see [Options.ValidateSettings]) and those of the connection,
// the event hub and the store.
func (o Options) Validate() error {
	o = o.WithDefaults()
	var errs []error
	switch {
	case o.Connection == "" && o.Namespace == "":
		errs = append(errs, errors.New("connection or namespace is required"))
	case o.Connection != "" && o.Namespace != "":
		errs = append(errs, errors.New("connection and namespace are mutually exclusive"))
	case o.Namespace != "" && o.Credential == nil:
		errs = append(errs, errors.New("namespace needs a credential"))
	}
	if o.Connection == "" && o.EventHub == "" {
		errs = append(errs, errors.New("eventhub is required"))
	}
	if o.Store == nil {
		errs = append(errs, errors.New("checkpoint store is required"))
	}
	return errors.Join(append(errs, o.ValidateSettings())...)
}

// ValidateSettings reports every problem of o's settings (after defaults):
// all but Connection, Namespace, Credential, EventHub and Store, the
// settings a connector's `source:` block in connectors.yaml sets. The
// problems are [*config.Error] values whose paths are the block's keys
// (batch.max_events, load_balancing.strategy), joined, so that `ehsink
// validate` and `ehsink run` report them alike.
func (o Options) ValidateSettings() error {
	o = o.WithDefaults()
	var errs []error
	add := func(path, format string, args ...any) {
		errs = append(errs, &config.Error{Path: path, Err: fmt.Errorf(format, args...)})
	}
	if err := checkStart(o.Start); err != nil {
		add("start", "%w", err)
	}
	for _, id := range slices.Sorted(maps.Keys(o.StartPartitions)) {
		if err := checkStart(o.StartPartitions[id]); err != nil {
			add(config.JoinPath("start_partitions", id), "%w", err)
		}
	}
	if err := config.OneOf(o.OnInvalidCheckpoint, string(policyFail), string(policyEarliest), string(policyLatest)); err != nil {
		add("on_invalid_checkpoint", "%w", err)
	}
	if o.MaxEvents < 0 {
		add("batch.max_events", "must be positive, got %d", o.MaxEvents)
	}
	if o.MaxWait < 0 {
		add("batch.max_wait", "must be positive, got %s", o.MaxWait)
	}
	if o.Prefetch > maxPrefetch {
		add("prefetch", "%d exceeds %d, the most the Event Hubs SDK prefetches", o.Prefetch, maxPrefetch)
	}
	if o.Prefetch < 0 && o.MaxEvents > maxPrefetch {
		add("batch.max_events", "%d exceeds %d, the limit with prefetch disabled (a negative prefetch)", o.MaxEvents, maxPrefetch)
	}
	if o.Connections < 0 || o.Connections > maxConnections {
		add("connections", "must be between 0 (one per partition up to the number of cores) and %d, got %d", maxConnections, o.Connections)
	}
	if err := config.OneOf(o.Strategy, string(azeventhubs.ProcessorStrategyBalanced), string(azeventhubs.ProcessorStrategyGreedy)); err != nil {
		add("load_balancing.strategy", "%w", err)
	}
	if o.UpdateInterval < 0 {
		add("load_balancing.update_interval", "must be positive, got %s", o.UpdateInterval)
	}
	if o.OwnershipExpiration < 0 {
		add("load_balancing.ownership_expiration", "must be positive, got %s", o.OwnershipExpiration)
	}
	if o.UpdateInterval > 0 && o.OwnershipExpiration > 0 && o.OwnershipExpiration < 2*o.UpdateInterval {
		add("load_balancing.ownership_expiration",
			"%s is less than twice update_interval (%s): a single late renewal would let another replica claim a partition this one still reads",
			o.OwnershipExpiration, o.UpdateInterval)
	}
	if o.MaxWait > 0 && o.OwnershipExpiration > 0 && o.MaxWait > o.OwnershipExpiration {
		add("batch.max_wait",
			"%s is longer than load_balancing.ownership_expiration (%s): ownership could expire while a batch is still being filled",
			o.MaxWait, o.OwnershipExpiration)
	}
	return errors.Join(errs...)
}

// checkStart checks a start position: earliest, latest, an RFC 3339 time or
// seq:N.
func checkStart(s string) error {
	switch {
	case s == "earliest", s == "latest":
		return nil
	case strings.HasPrefix(s, "seq:"):
		if n, err := strconv.ParseInt(strings.TrimPrefix(s, "seq:"), 10, 64); err != nil || n < 0 {
			return fmt.Errorf("%s: a sequence number is written seq:N with N >= 0", config.Quote(s))
		}
		return nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return fmt.Errorf("%s: use earliest, latest, an RFC 3339 time (2026-01-02T15:04:05Z) or seq:N", config.Quote(s))
	}
	return nil
}
