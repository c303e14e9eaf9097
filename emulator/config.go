package emulator

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
)

// Defaults applied to zero fields of Config.
const (
	// defaultAddr is the default listen address: loopback, any free port.
	defaultAddr = "127.0.0.1:0"
	// defaultMaxMessageSize is the default max-message-size advertised to
	// senders (the Standard tier's 1 MiB).
	defaultMaxMessageSize = 1 << 20
	// defaultHeartbeat is how often the server sends an empty frame on
	// every connection; the SDK drops a connection after 60 s of silence.
	defaultHeartbeat = 15 * time.Second
)

// HubConfig declares one event hub.
type HubConfig struct {
	// Name is the event hub name (the EntityPath of connection strings).
	Name string
	// Partitions is the partition count; IDs are "0" to "Partitions-1".
	// If zero, 4.
	Partitions int
	// ConsumerGroups lists consumer groups besides "$Default", which
	// always exists. Receivers on other groups get amqp:not-found.
	ConsumerGroups []string
}

// Config configures Start. The zero value is valid: a memory-only
// emulator with no hubs on a free loopback port.
type Config struct {
	// Addr is the AMQP listen address. If empty, DefaultAddr.
	Addr string
	// Hubs lists the event hubs.
	Hubs []HubConfig
	// DataDir keeps every partition on disk so a restarted emulator serves
	// the same events. If empty, events live in memory only.
	DataDir string
	// Retention drops events older than this. If zero, events are kept
	// forever (or until RetentionBytes applies).
	Retention time.Duration
	// Fsync says when stored events are forced to disk with DataDir. The
	// zero value, FsyncInterval, syncs every second.
	Fsync FsyncPolicy
	// RetentionBytes bounds the stored bytes per partition. If zero,
	// unlimited.
	RetentionBytes int64
	// MaxMessageSize is the largest message (a whole batch) a sender may
	// send, advertised on sender links and enforced with
	// amqp:link:message-size-exceeded. If zero, DefaultMaxMessageSize.
	MaxMessageSize int64
	// Keys maps SAS key names to keys, each a namespace policy with all
	// rights. If Keys and Policies are both empty, every CBS token, SASL
	// PLAIN login and link is accepted. Otherwise tokens are verified and
	// links authorized as the service does (see auth.go).
	Keys map[string]secret.String
	// Policies are shared access policies with explicit rights or an
	// event hub scope, besides Keys. Key names must be unique across both.
	Policies []Policy
	// TLS, if set, adds an AMQPS listener for clients that always use TLS.
	TLS *TLSOptions
	// AdminAddr, if set, starts the admin HTTP server (fault injection and
	// /health) on this address; use a loopback address. If empty, none.
	AdminAddr string
	// SchemaRegistryAddr, if set, serves Azure Schema Registry and a
	// Confluent-compatible schema registry over HTTPS on this address
	// (see schemaregistry.go), with the certificate of Config.TLS or, without
	// it, one generated at start (Server.CertificatePEM). With DataDir the
	// schemas are kept there, so a restarted emulator serves the same ids;
	// else in memory. Start listens there (New does not). If empty, none.
	SchemaRegistryAddr string
	// SchemaRegistryBasicAuth, if set ("user:password"), is the basic
	// authentication the Confluent routes require. If empty, they take any
	// request. (The Azure routes check SAS tokens as AMQP does.)
	SchemaRegistryBasicAuth secret.String
	// SchemaRegistryCertOut, if set, is the file the certificate schema
	// registry clients trust is written to, as TLSOptions.CertOut (which
	// wins with Config.TLS: it is the same certificate).
	SchemaRegistryCertOut string
	// Heartbeat is the interval of the server's empty frames. If zero,
	// DefaultHeartbeat.
	Heartbeat time.Duration
	// Logger receives connection and error logs. If nil, logs are discarded.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.MaxMessageSize <= 0 {
		c.MaxMessageSize = defaultMaxMessageSize
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = defaultHeartbeat
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TLS != nil {
		t := *c.TLS
		t.withDefaults()
		c.TLS = &t
	}
	for i := range c.Hubs {
		if c.Hubs[i].Partitions == 0 {
			c.Hubs[i].Partitions = 4
		}
	}
	return c
}

// Validate reports every problem in c, each prefixed with its path.
// Hub names and partition counts are checked again by the hub store.
func (c Config) Validate() error {
	var errs []error
	for i, h := range c.Hubs {
		if h.Name == "" {
			errs = append(errs, fmt.Errorf("hubs[%d].name: required", i))
		}
		if h.Partitions < 0 {
			errs = append(errs, fmt.Errorf("hubs[%d].partitions: %d is negative", i, h.Partitions))
		}
	}
	if c.MaxMessageSize < 0 {
		errs = append(errs, fmt.Errorf("max_message_size: %d is negative", c.MaxMessageSize))
	}
	if c.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention: %s is negative", c.Retention))
	}
	errs = append(errs, c.validatePolicies()...)
	if a := c.SchemaRegistryBasicAuth.Reveal(); a != "" && !strings.Contains(a, ":") {
		errs = append(errs, errors.New("schema_registry_basic_auth: want user:password"))
	}
	if c.TLS != nil {
		if err := c.TLS.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Config) maxMessageSize() int64    { return c.MaxMessageSize }
func (c *Config) heartbeat() time.Duration { return c.Heartbeat }
