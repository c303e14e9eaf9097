package hub

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// DefaultConsumerGroup is the consumer group every hub has, declared or not.
const DefaultConsumerGroup = "$Default"

// Defaults applied by Open to zero fields of [Config].
const (
	// DefaultSegmentBytes is the default [Config.SegmentBytes].
	DefaultSegmentBytes = 64 << 20
	// DefaultFsyncEvery is the default [Config.FsyncEvery].
	DefaultFsyncEvery = time.Second
	// DefaultRetentionCheckEvery is the default [Config.RetentionCheckEvery].
	DefaultRetentionCheckEvery = 5 * time.Second
	// MaxPartitions is the largest partition count a hub may have.
	MaxPartitions = 1024
	// MaxPartitionKeyLen is the longest partition key, in bytes, Append stores.
	MaxPartitionKeyLen = 0xFFFE
)

// FsyncPolicy says when appended records are forced to stable storage.
// It matters only with [Config.DataDir].
type FsyncPolicy int

const (
	// FsyncInterval (the zero value) syncs every partition that has new
	// records every [Config.FsyncEvery]. A crash loses at most that window.
	FsyncInterval FsyncPolicy = iota
	// FsyncAlways syncs the segment file before Append returns.
	FsyncAlways
	// FsyncNever leaves syncing to the operating system.
	FsyncNever
)

// String returns "interval", "always" or "never".
func (f FsyncPolicy) String() string {
	switch f {
	case FsyncInterval:
		return "interval"
	case FsyncAlways:
		return "always"
	case FsyncNever:
		return "never"
	}
	return fmt.Sprintf("FsyncPolicy(%d)", int(f))
}

// ParseFsyncPolicy parses "interval", "always" or "never" (for flags).
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch s {
	case "interval", "":
		return FsyncInterval, nil
	case "always":
		return FsyncAlways, nil
	case "never":
		return FsyncNever, nil
	}
	return 0, fmt.Errorf("hub: unknown fsync policy %q (want interval, always or never)", s)
}

// Config configures a [Namespace]. The zero value is a valid, empty,
// memory-only namespace. Open does not modify the caller's Config.
type Config struct {
	// Hubs lists the event hubs of the namespace. Names must be unique.
	Hubs []HubConfig
	// DataDir keeps every partition as segment files under
	// DataDir/<hub>/<partition>/. If empty, events are kept in memory only.
	// Only one Namespace may use a DataDir at a time.
	DataDir string
	// Retention drops events older than this (by enqueued time). If zero,
	// events are kept forever (unless RetentionBytes applies).
	Retention time.Duration
	// RetentionBytes bounds the stored record bytes per partition; the oldest
	// events are dropped first. If zero, unlimited.
	RetentionBytes int64
	// SegmentBytes is the size at which a partition starts a new segment
	// file. Retention frees storage a whole segment at a time. In memory
	// mode, storage chunks are at most min(SegmentBytes, 1 MiB).
	// If zero, DefaultSegmentBytes (64 MiB).
	SegmentBytes int64
	// Fsync is the sync policy with DataDir. The zero value is FsyncInterval.
	Fsync FsyncPolicy
	// FsyncEvery is the period of FsyncInterval. If zero, 1s.
	FsyncEvery time.Duration
	// RetentionCheckEvery is how often the background goroutine applies
	// Retention and RetentionBytes. If zero, 5s. RetentionBytes is also
	// applied on every Append.
	RetentionCheckEvery time.Duration
	// Now is the clock for enqueued times, retention and server-busy.
	// If nil, time.Now.
	Now func() time.Time
	// Logger receives warnings (truncated torn records, I/O errors) and
	// debug records (segment rolls). If nil, logs are discarded.
	Logger *slog.Logger
}

// HubConfig declares one event hub.
type HubConfig struct {
	// Name is the event hub name: 1 to 256 letters, digits, '.', '-' or '_',
	// starting and ending with a letter or digit.
	Name string
	// Partitions is the partition count, 1 to MaxPartitions. Partition IDs
	// are "0" to "Partitions-1".
	Partitions int
	// ConsumerGroups lists the consumer groups receivers may use besides
	// "$Default", which always exists.
	ConsumerGroups []string
}

// withDefaults returns a copy of c with defaults applied.
func (c Config) withDefaults() Config {
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.FsyncEvery <= 0 {
		c.FsyncEvery = DefaultFsyncEvery
	}
	if c.RetentionCheckEvery <= 0 {
		c.RetentionCheckEvery = DefaultRetentionCheckEvery
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem in c, each prefixed with its path
// (for example "hubs[1].partitions: ...").
func (c Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, h := range c.Hubs {
		if err := validName(h.Name); err != nil {
			errs = append(errs, fmt.Errorf("hubs[%d].name: %w", i, err))
		} else if seen[h.Name] {
			errs = append(errs, fmt.Errorf("hubs[%d].name: duplicate hub %q", i, h.Name))
		}
		seen[h.Name] = true
		if h.Partitions < 1 || h.Partitions > MaxPartitions {
			errs = append(errs, fmt.Errorf("hubs[%d].partitions: %d is not between 1 and %d", i, h.Partitions, MaxPartitions))
		}
		for j, cg := range h.ConsumerGroups {
			if cg == DefaultConsumerGroup {
				continue
			}
			if err := validName(cg); err != nil {
				errs = append(errs, fmt.Errorf("hubs[%d].consumer_groups[%d]: %w", i, j, err))
			}
		}
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("retention: must not be negative"))
	}
	if c.RetentionBytes < 0 {
		errs = append(errs, errors.New("retention_bytes: must not be negative"))
	}
	switch c.Fsync {
	case FsyncInterval, FsyncAlways, FsyncNever:
	default:
		errs = append(errs, fmt.Errorf("fsync: unknown policy %d", int(c.Fsync)))
	}
	return errors.Join(errs...)
}

// validName checks an entity name (hub or consumer group); the rule also keeps
// hub names safe as directory names.
func validName(s string) error {
	if s == "" {
		return errors.New("required")
	}
	if len(s) > 256 {
		return fmt.Errorf("%q is longer than 256 characters", s)
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		alnum := b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
		if !alnum && !strings.ContainsRune(".-_", rune(b)) {
			return fmt.Errorf("%q: only letters, digits, '.', '-' and '_' are allowed", s)
		}
		if !alnum && (i == 0 || i == len(s)-1) {
			return fmt.Errorf("%q must start and end with a letter or digit", s)
		}
	}
	return nil
}
