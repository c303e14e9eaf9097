package produce

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// MaxLineBytes is the longest line [Lines] reads; Event Hubs refuses larger
// events anyway (1 MiB on the Standard tier).
const MaxLineBytes = 1 << 20

// LinesOptions configures [Lines]. The zero value lets the service choose
// the partition of each batch.
type LinesOptions struct {
	// PartitionKey routes every line by this key.
	PartitionKey string
	// PartitionID sends every line to this partition. Mutually exclusive
	// with PartitionKey.
	PartitionID string
	// KeySeparator, when not empty, makes each line KEY, the separator,
	// then the body: the line is sent with that partition key (an empty
	// KEY: none). A line without the separator is an error. Mutually
	// exclusive with PartitionKey and PartitionID.
	KeySeparator string
	// ContentType is set on every event when not empty (for example
	// application/json).
	ContentType string
	// Encode, if set, turns each line's body into the event's body (`send
	// --avro`: a JSON record into Avro); its error names the line.
	Encode func(line []byte) ([]byte, error)
	// Properties are set as the application properties of every event.
	Properties map[string]any
	// SkipEmpty skips empty lines (empty bodies). If false, an empty line
	// is an event with an empty body, as a tombstone is: every line is one
	// event.
	SkipEmpty bool
	// Logger receives an info record at the end. If nil, logs are discarded.
	Logger *slog.Logger
	// OnSent, if set, is called with the number of events of each batch
	// the hub accepted (progress display).
	OnSent func(events int)
}

// Lines sends each line of r (without its line ending) as one event, in
// order, batched up to the hub's size limit. It returns the number of events
// the hub accepted; on an error, events read after the last sent batch are
// not sent.
func Lines(ctx context.Context, producer *azeventhubs.ProducerClient, r io.Reader, opts LinesOptions) (int, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := Target{PartitionKey: opts.PartitionKey, PartitionID: opts.PartitionID}
	if _, err := t.batchOptions(); err != nil {
		return 0, err
	}
	if opts.KeySeparator != "" && t != (Target{}) {
		return 0, errors.New("produce: a key per line excludes a partition key or ID for all lines")
	}
	b := newBatcher(producer, 0)
	b.onSent = opts.OnSent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		body := sc.Bytes()
		if opts.KeySeparator != "" {
			key, rest, ok := bytes.Cut(body, []byte(opts.KeySeparator))
			if !ok {
				return b.sent, fmt.Errorf("line %d: no %q between the partition key and the body", line, opts.KeySeparator)
			}
			t, body = Target{PartitionKey: string(key)}, rest
		}
		if len(body) == 0 && opts.SkipEmpty {
			continue
		}
		ev := &azeventhubs.EventData{Body: append([]byte{}, body...)}
		if opts.Encode != nil {
			enc, err := opts.Encode(body)
			if err != nil {
				return b.sent, fmt.Errorf("line %d: %w", line, err)
			}
			ev.Body = enc
		}
		if opts.ContentType != "" {
			ct := opts.ContentType
			ev.ContentType = &ct
		}
		if len(opts.Properties) > 0 {
			ev.Properties = maps.Clone(opts.Properties)
		}
		if err := b.Add(ctx, t, ev); err != nil {
			return b.sent, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return b.sent, fmt.Errorf("produce: reading line %d: %w", line+1, err)
	}
	if err := b.Flush(ctx); err != nil {
		return b.sent, err
	}
	log.Info("lines sent", "events", b.sent)
	return b.sent, nil
}
