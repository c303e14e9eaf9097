package source

import (
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/config"
)

// Defaults applied to zero fields of [Settings].
const (
	defaultMaxEvents           = 2000
	defaultPrefetch            = 2000 // per partition, at most
	prefetchBudget             = 32000
	minDefaultPrefetch         = 100
	defaultMaxWait             = time.Second
	defaultUpdateInterval      = 10 * time.Second
	defaultOwnershipExpiration = time.Minute
)

// Settings are the source's settings as a connector's `source:` block
// declares them. Each has one owner here: its key (the yaml tag), its
// default ([Settings.WithDefaults]) and its checks ([Settings.Validate],
// which names the key).
type Settings struct {
	// ConsumerGroup is the consumer group. If empty, $Default.
	ConsumerGroup string `yaml:"consumer_group"`
	// Start is where a partition with no checkpoint and no sink watermark
	// starts: "earliest", "latest", an RFC 3339 enqueued time (inclusive)
	// or "seq:N" (the event with sequence number N, inclusive). If empty,
	// earliest.
	Start string `yaml:"start"`
	// StartPartitions overrides Start per partition ID.
	StartPartitions map[string]string `yaml:"start_partitions"`
	// OnInvalidCheckpoint is what to do when a resume position points past
	// the partition's last event or before its retained start: "fail" (Run
	// fails), "earliest" or "latest". If empty, fail.
	OnInvalidCheckpoint string `yaml:"on_invalid_checkpoint"`
	// Batch bounds each batch handed to the sink.
	Batch Batch `yaml:"batch"`
	// Prefetch is the number of events the SDK keeps ready per partition.
	// If zero, 32,000 spread over the hub's partitions, between 100 and
	// 2,000 each ([Settings.PrefetchFor]); negative disables prefetch
	// (Batch.MaxEvents is then at most 5000).
	Prefetch int `yaml:"prefetch"`
	// Connections is the number of AMQP connections partitions are
	// received on, each partition on one of them (see connections.go). If
	// zero, one per partition up to GOMAXPROCS ([Settings.ConnectionsFor]);
	// 1 receives every partition on the processor's own connection, which
	// also keeps the ownership leases.
	Connections int `yaml:"connections"`
	// LoadBalancing configures how replicas share partitions.
	LoadBalancing LoadBalancing `yaml:"load_balancing"`
	// CustomEndpoint, if set, is the host[:port] the AMQP connections are
	// made to instead of the namespace's (a TCP proxy, a private
	// endpoint). The namespace stays the connection's: leases and
	// checkpoints are kept under its name, so replicas that reach it by
	// different routes still share them.
	CustomEndpoint string `yaml:"custom_endpoint"`
}

// Batch bounds a batch.
type Batch struct {
	// MaxEvents is the most events one Receive returns. If zero, 2000
	// (measured: at 500, flushes and checkpoints cost a quarter more CPU
	// per event).
	MaxEvents int `yaml:"max_events"`
	// MaxWait is the longest one Receive waits for MinEvents before
	// handing over what arrived (an empty batch when nothing did). If
	// zero, 1s.
	MaxWait time.Duration `yaml:"max_wait"`
	// MinEvents is how many events one Receive waits for, up to MaxWait,
	// before it hands a batch over. If zero, 1: a batch is handed over as
	// soon as an event is there, with what else is already there (up to
	// MaxEvents), so that live traffic is committed within milliseconds
	// and a backlog still comes in full batches. A larger value trades
	// freshness for fewer, larger commits; MaxEvents waits for full
	// batches as ehsink did before 2026-12-06. The end of a backlog is not
	// waited for: a partition known to hold fewer events (its last
	// properties read) is handed over at its end.
	MinEvents int `yaml:"min_events"`
	// MinWait is how long one Receive keeps gathering live traffic after
	// its first MinEvents came, unless MaxEvents are there first or
	// MaxWait passes: at most one batch per MinWait per partition, for
	// fewer, larger commits at low rates (on a backlog a batch is handed
	// over once it holds what the partition was known to hold). If zero,
	// a batch is handed over once nothing more is immediately there (a
	// linger of a few milliseconds).
	MinWait time.Duration `yaml:"min_wait"`
}

// LoadBalancing configures the processor's partition ownership.
type LoadBalancing struct {
	// Strategy is the SDK load-balancing strategy, "balanced" or "greedy".
	// If empty, balanced.
	Strategy string `yaml:"strategy"`
	// UpdateInterval is how often ownership is renewed and rebalanced. If
	// zero, 10s.
	UpdateInterval time.Duration `yaml:"update_interval"`
	// OwnershipExpiration is how long an unrenewed ownership lasts. If
	// zero, 60s. It must be at least twice UpdateInterval, and
	// Batch.MaxWait must not exceed it.
	OwnershipExpiration time.Duration `yaml:"ownership_expiration"`
}

// WithDefaults returns a copy of s with the documented default of every
// zero setting applied.
func (s Settings) WithDefaults() Settings {
	if s.ConsumerGroup == "" {
		s.ConsumerGroup = azeventhubs.DefaultConsumerGroup
	}
	if s.Start == "" {
		s.Start = "earliest"
	}
	if s.OnInvalidCheckpoint == "" {
		s.OnInvalidCheckpoint = string(policyFail)
	}
	if s.Batch.MaxEvents == 0 {
		s.Batch.MaxEvents = defaultMaxEvents
	}
	if s.Batch.MaxWait == 0 {
		s.Batch.MaxWait = defaultMaxWait
	}
	if s.Batch.MinEvents == 0 {
		s.Batch.MinEvents = 1
	}
	if s.LoadBalancing.Strategy == "" {
		s.LoadBalancing.Strategy = string(azeventhubs.ProcessorStrategyBalanced)
	}
	if s.LoadBalancing.UpdateInterval == 0 {
		s.LoadBalancing.UpdateInterval = defaultUpdateInterval
	}
	if s.LoadBalancing.OwnershipExpiration == 0 {
		s.LoadBalancing.OwnershipExpiration = defaultOwnershipExpiration
	}
	return s
}

// ConnectionsFor returns the number of connections partitions are
// received on: Connections, or when it is zero one per partition up to
// one per core (GOMAXPROCS), since a connection beyond that has no core
// to decode on.
func (s Settings) ConnectionsFor(partitions int) int {
	if s.Connections > 0 {
		return s.Connections
	}
	return max(1, min(partitions, runtime.GOMAXPROCS(0)))
}

// PrefetchFor returns the prefetch of each partition's link in a hub of
// partitions: Prefetch, or when it is zero prefetchBudget spread over the
// partitions, between minDefaultPrefetch and defaultPrefetch. A prefetched
// event holds about 1 KB of heap (a 230-byte body, its annotations and
// the AMQP message), so a fixed 2,000 per partition made a lone replica
// of a 100-partition hub hold 200 MB of heap on a backlog, and one of three
// replicas of a 1,024-partition hub 680 MB; reading 32 and 100 partitions
// measured as fast with 1,000 and 320 as with 2,000. Up to 16 partitions
// keep 2,000, as many as a batch, so that a batch does not wait for
// credit round trips.
func (s Settings) PrefetchFor(partitions int) int {
	if s.Prefetch != 0 {
		return s.Prefetch
	}
	return min(defaultPrefetch, max(minDefaultPrefetch, prefetchBudget/max(1, partitions)))
}

// Validate reports every problem of the settings (after defaults), as
// [*config.Error] values whose paths are their keys (batch.max_events,
// load_balancing.strategy), joined: `ehsink validate` and `ehsink run`
// both call it and report alike.
func (o Settings) Validate() error {
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
	if o.Batch.MaxEvents < 0 {
		add("batch.max_events", "must be positive, got %d", o.Batch.MaxEvents)
	}
	if o.Batch.MaxWait < 0 {
		add("batch.max_wait", "must be positive, got %s", o.Batch.MaxWait)
	}
	switch {
	case o.Batch.MinEvents < 0:
		add("batch.min_events", "must be positive, got %d", o.Batch.MinEvents)
	case o.Batch.MaxEvents > 0 && o.Batch.MinEvents > o.Batch.MaxEvents:
		add("batch.min_events", "%d exceeds batch.max_events (%d)", o.Batch.MinEvents, o.Batch.MaxEvents)
	}
	switch {
	case o.Batch.MinWait < 0:
		add("batch.min_wait", "must be positive, got %s", o.Batch.MinWait)
	case o.Batch.MaxWait > 0 && o.Batch.MinWait > o.Batch.MaxWait:
		add("batch.min_wait", "%s exceeds batch.max_wait (%s), which bounds every receive", o.Batch.MinWait, o.Batch.MaxWait)
	}
	if o.Prefetch > maxPrefetch {
		add("prefetch", "%d exceeds %d, the most the Event Hubs SDK prefetches", o.Prefetch, maxPrefetch)
	}
	if o.Prefetch < 0 && o.Batch.MaxEvents > maxPrefetch {
		add("batch.max_events", "%d exceeds %d, the limit with prefetch disabled (a negative prefetch)", o.Batch.MaxEvents, maxPrefetch)
	}
	if strings.Contains(o.CustomEndpoint, "/") {
		add("custom_endpoint", "%q: want host or host:port, not a URL", o.CustomEndpoint)
	}
	if o.Connections < 0 || o.Connections > maxConnections {
		add("connections", "must be between 0 (one per partition up to the number of cores) and %d, got %d", maxConnections, o.Connections)
	}
	if err := config.OneOf(o.LoadBalancing.Strategy, string(azeventhubs.ProcessorStrategyBalanced), string(azeventhubs.ProcessorStrategyGreedy)); err != nil {
		add("load_balancing.strategy", "%w", err)
	}
	if o.LoadBalancing.UpdateInterval < 0 {
		add("load_balancing.update_interval", "must be positive, got %s", o.LoadBalancing.UpdateInterval)
	}
	if o.LoadBalancing.OwnershipExpiration < 0 {
		add("load_balancing.ownership_expiration", "must be positive, got %s", o.LoadBalancing.OwnershipExpiration)
	}
	if o.LoadBalancing.UpdateInterval > 0 && o.LoadBalancing.OwnershipExpiration > 0 && o.LoadBalancing.OwnershipExpiration < 2*o.LoadBalancing.UpdateInterval {
		add("load_balancing.ownership_expiration",
			"%s is less than twice update_interval (%s): a single late renewal would let another replica claim a partition this one still reads",
			o.LoadBalancing.OwnershipExpiration, o.LoadBalancing.UpdateInterval)
	}
	if o.Batch.MaxWait > 0 && o.LoadBalancing.OwnershipExpiration > 0 && o.Batch.MaxWait > o.LoadBalancing.OwnershipExpiration {
		add("batch.max_wait",
			"%s is longer than load_balancing.ownership_expiration (%s): ownership could expire while a batch is still being filled",
			o.Batch.MaxWait, o.LoadBalancing.OwnershipExpiration)
	}
	return errors.Join(errs...)
}
