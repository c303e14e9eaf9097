package produce

import (
	"context"
	"errors"
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// Target says which partition events go to. The zero value lets the service
// choose (round robin).
type Target struct {
	// PartitionKey routes every event by the hash of this key.
	PartitionKey string
	// PartitionID sends every event to this partition. Mutually exclusive
	// with PartitionKey.
	PartitionID string
}

func (t Target) batchOptions() (*azeventhubs.EventDataBatchOptions, error) {
	switch {
	case t.PartitionKey != "" && t.PartitionID != "":
		return nil, errors.New("produce: partition key and partition ID are mutually exclusive")
	case t.PartitionKey != "":
		k := t.PartitionKey
		return &azeventhubs.EventDataBatchOptions{PartitionKey: &k}, nil
	case t.PartitionID != "":
		id := t.PartitionID
		return &azeventhubs.EventDataBatchOptions{PartitionID: &id}, nil
	}
	return &azeventhubs.EventDataBatchOptions{}, nil
}

// DefaultMaxPendingBytes is how many bytes of unsent events a producer
// holds over all its partition keys when its options leave it zero: with
// many keys, one full batch per key would hold most of a backlog.
const DefaultMaxPendingBytes = 4 << 20

// batcher fills one batch per target and sends it when the next event does
// not fit, or the largest pending one when all of them together hold more
// than maxPending bytes; so its memory is bounded by maxPending whatever the
// number of events or targets. It is used by one goroutine.
type batcher struct {
	producer    *azeventhubs.ProducerClient
	batches     map[Target]*azeventhubs.EventDataBatch
	order       []Target // targets in first-use order, so Flush sends in a stable order
	sent        int      // events the service accepted
	pending     uint64   // bytes in unsent batches
	maxPending  uint64
	peakPending uint64    // the most pending ever held, for tests
	onSent      func(int) // called with each sent batch's event count; may be nil
}

// newBatcher returns a batcher holding at most maxPending bytes unsent
// (DefaultMaxPendingBytes if maxPending <= 0), plus the event being added.
func newBatcher(p *azeventhubs.ProducerClient, maxPending int) *batcher {
	if maxPending <= 0 {
		maxPending = DefaultMaxPendingBytes
	}
	return &batcher{producer: p, batches: map[Target]*azeventhubs.EventDataBatch{}, maxPending: uint64(maxPending)}
}

// Add queues ev for t, sending the pending batch of t first when ev does not fit.
func (b *batcher) Add(ctx context.Context, t Target, ev *azeventhubs.EventData) error {
	batch, ok := b.batches[t]
	if !ok {
		opts, err := t.batchOptions()
		if err != nil {
			return err
		}
		batch, err = b.producer.NewEventDataBatch(ctx, opts)
		if err != nil {
			return fmt.Errorf("produce: new batch: %w", err)
		}
		b.batches[t] = batch
		b.order = append(b.order, t)
	}
	before := batch.NumBytes()
	err := batch.AddEventData(ev, nil)
	if !errors.Is(err, azeventhubs.ErrEventDataTooLarge) {
		if err != nil {
			return fmt.Errorf("produce: add event: %w", err)
		}
		b.pending += batch.NumBytes() - before
		b.peakPending = max(b.peakPending, b.pending)
		if b.pending > b.maxPending {
			return b.send(ctx, b.largest())
		}
		return nil
	}
	if batch.NumEvents() == 0 {
		return fmt.Errorf("produce: event of %d bytes: %w", len(ev.Body), err)
	}
	if err := b.send(ctx, t); err != nil {
		return err
	}
	return b.Add(ctx, t, ev)
}

// send sends the pending batch of t, if any, and forgets it.
func (b *batcher) send(ctx context.Context, t Target) error {
	batch, ok := b.batches[t]
	if !ok {
		return nil
	}
	delete(b.batches, t)
	b.pending -= batch.NumBytes()
	for i, o := range b.order {
		if o == t {
			b.order = append(b.order[:i], b.order[i+1:]...)
			break
		}
	}
	n := int(batch.NumEvents())
	if n == 0 {
		return nil
	}
	if err := b.producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		return fmt.Errorf("produce: sending %d events: %w", n, err)
	}
	b.sent += n
	if b.onSent != nil {
		b.onSent(n)
	}
	return nil
}

// largest is the target whose pending batch holds the most bytes.
func (b *batcher) largest() Target {
	var (
		best Target
		most uint64
	)
	for _, t := range b.order {
		if n := b.batches[t].NumBytes(); n > most {
			best, most = t, n
		}
	}
	return best
}

// Flush sends every pending batch.
func (b *batcher) Flush(ctx context.Context) error {
	for len(b.order) > 0 {
		if err := b.send(ctx, b.order[0]); err != nil {
			return err
		}
	}
	return nil
}
