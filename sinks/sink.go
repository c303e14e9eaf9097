package sinks

import (
	"context"
	"log/slog"
	"time"
)

// Driver builds sinks of one type. A driver is registered once, in the init
// function of its package, and must be safe for concurrent use.
type Driver interface {
	// NewConfig returns a pointer to a new config struct with its defaults set.
	// The runner decodes the connector's `sink:` block into it by its `yaml`
	// field tags (unknown keys are errors) and then calls Validate if the value
	// implements [Validator]. The `type` key is consumed by the runner.
	NewConfig() any
	// New builds a sink from a config made by NewConfig, decoded and
	// validated. ctx bounds the call only (connecting, checking the target);
	// it must not be kept for the sink's lifetime.
	New(ctx context.Context, cfg any, info Info) (Sink, error)
}

// Validator is implemented by sink configs that check themselves. Errors
// should name the field, preferably as [*FieldError] values joined with
// errors.Join, so that `ehsink validate` can report every problem with its
// full path.
type Validator interface {
	// Validate reports every problem of the config, or nil.
	Validate() error
}

// Info tells a sink which connector it serves. A sink that keeps state
// outside its destination's data (a prefix, a table of watermarks) may key
// it by these fields, which stay the same across restarts and replicas.
type Info struct {
	// Connector is the connector's name from connectors.yaml.
	Connector string
	// Namespace is the Event Hubs namespace the connector reads: the host
	// of its connection string (with the port, when the string has one) or
	// its source.namespace. It is "emulator" for a connector reading the
	// built-in emulator (source.connection: emulator), whose port changes
	// from run to run. Empty for a sink built outside the runner.
	Namespace string
	// EventHub is the event hub's name: source.eventhub, or the EntityPath
	// of the connection string.
	EventHub string
	// ConsumerGroup is the consumer group the connector reads with
	// (source.consumer_group, "$Default" unless set).
	ConsumerGroup string
	// Logger receives the sink's logs, already carrying the connector's
	// name. Never nil when set by the runner; a sink built by hand with a
	// nil Logger must discard logs.
	Logger *slog.Logger
}

// Sink is one configured destination. It is safe for concurrent use: the
// runner opens writers for several partitions from several goroutines.
type Sink interface {
	// Open prepares a writer for one partition and returns the watermark the
	// sink has durably committed for it, or nil when it holds nothing of that
	// partition. ctx bounds the call only.
	Open(ctx context.Context, partition string) (Writer, *Position, error)
	// Close releases the sink's shared resources (pools, clients). Writers
	// must be closed first. Close is idempotent.
	Close(ctx context.Context) error
}

// Writer writes the events of one partition. It is used by one goroutine at
// a time.
type Writer interface {
	// Write hands the writer a batch of events, in sequence-number order and
	// all above the watermark the writer reported. The writer may buffer
	// them. An event that cannot be written (a value that does not convert)
	// is reported in a [*BatchError]; the other events of the batch are still
	// taken. Any other error fails the whole batch.
	Write(ctx context.Context, events []Event) error
	// Flush makes durable everything passed to Write since the last Flush and
	// returns the new watermark: the position of the last event written, or
	// of the last event reported as failed once its dead letter is stored. A
	// failed Flush keeps what was written, so Flush may be called again; a
	// transient failure is marked with [Transient]. Events the destination
	// refuses at commit are reported in a [*RejectedError], with nothing
	// committed; the caller dead-letters them and calls Flush again. A writer that finds
	// another writer of the partition committed part of what it holds, and
	// cannot drop just that part, discards it and returns [ErrFenced].
	Flush(ctx context.Context) (*Position, error)
	// Close releases the writer. Whatever was written and not flushed is
	// abandoned, never made visible: the runner flushes first when it wants
	// to keep it (on shutdown), and does not when the partition was lost.
	Close(ctx context.Context) error
}

// DeadLetter is an event the runner gave up on, with the reason.
type DeadLetter struct {
	// Event is the event as received ([Event.Received]): its Body holds the
	// payload as it came (an Avro event's bytes, not their decoded JSON),
	// with its content type and properties, so that it can be replayed.
	Event Event
	// Reason says why it was not written.
	Reason string
	// FailedAt is when the runner gave up on it.
	FailedAt time.Time
}

// DeadLetterer is implemented by writers that store dead letters themselves,
// committed by the next Flush together with the data (one transaction, one
// file). Writers without it have their dead letters stored by the runner's
// dead-letter path before the flush.
type DeadLetterer interface {
	// DeadLetter adds letters to what the next Flush commits.
	DeadLetter(ctx context.Context, letters []DeadLetter) error
}

// Trimmer is implemented by writers that, rather than returning
// [ErrFenced], drop at Flush what another writer of the partition already
// committed and commit the rest. The runner counts the dropped events as
// skipped, not committed, so that the replicas' committed counts add up
// to what the destination holds.
type Trimmer interface {
	// Trimmed reports how many of the events committed by the last
	// successful Flush were dropped so, each event counted once.
	Trimmed() int
}

// Batcher is implemented by writers that gather several batches into one
// commit, such as a Parquet file that rolls on size or age. The runner then
// flushes only when FlushDue says so (and always on shutdown), and
// checkpoints what Flush returns.
type Batcher interface {
	// FlushDue reports whether the data written so far should be committed
	// now. now is the runner's clock.
	FlushDue(now time.Time) bool
}
