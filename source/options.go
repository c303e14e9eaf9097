package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
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
	// Settings are the settings a connector's `source:` block sets.
	Settings
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
	// claimPrefetch gives the processor's claim links the configured
	// prefetch even with reader connections (tests: the cost
	// Source.claimPrefetch avoids).
	claimPrefetch bool
	// dialed, if set, sees every AMQP connection the source's clients dial
	// (tests: the socket carries internal/netdial's settings).
	dialed func(net.Conn)
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
	o.Settings = o.Settings.WithDefaults()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports every problem of o (after defaults), joined: the
// settings' (see [Settings.Validate]) and those of the connection, the
// event hub and the store.
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
	return errors.Join(append(errs, o.Settings.Validate())...)
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
