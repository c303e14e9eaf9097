package produce

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"

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
	// ContentType is set on every event when not empty (for example
	// application/json).
	ContentType string
	// KeepEmpty sends empty lines as empty events. If false, they are skipped.
	KeepEmpty bool
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
	b := newBatcher(producer, 0) // one target: bounded by one batch anyway
	b.onSent = opts.OnSent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 && !opts.KeepEmpty {
			continue
		}
		ev := &azeventhubs.EventData{Body: append([]byte(nil), sc.Bytes()...)}
		if opts.ContentType != "" {
			ct := opts.ContentType
			ev.ContentType = &ct
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
