package source_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// maxWaitNeverReached is the batch.max_wait of the freshness tests, and
// their bound is far below it: a receive that waited for it fails them.
const maxWaitNeverReached = 30 * time.Second

// batchTap is a partition handler that hands every non-empty batch over
// a channel, and closes claimed at its first claim.
type batchTap struct {
	batches chan []sinks.Event
	claimed chan struct{}
	once    sync.Once
}

func newBatchTap() *batchTap {
	return &batchTap{batches: make(chan []sinks.Event, 16), claimed: make(chan struct{})}
}

func (b *batchTap) handle(ctx context.Context, p *source.Partition) error {
	b.once.Do(func() { close(b.claimed) })
	for {
		batch, err := p.Receive(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			continue
		}
		select {
		case b.batches <- batch:
		case <-ctx.Done():
			return nil
		}
	}
}

// next returns the next batch, failing t when ctx ends first.
func (b *batchTap) next(t *testing.T, ctx context.Context, r *running, what string) []sinks.Event {
	t.Helper()
	select {
	case batch := <-b.batches:
		return batch
	case <-r.done:
		t.Fatalf("Run returned %v while waiting for %s", r.err, what)
	case <-ctx.Done():
		t.Fatalf("gave up waiting for %s: the receive waited for batch.max_wait (%s)", what, maxWaitNeverReached)
	}
	return nil
}

// sendOne sends one event with body to partition 0.
func sendOne(t *testing.T, ctx context.Context, p *azeventhubs.ProducerClient, body string) {
	t.Helper()
	batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptrTo("0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(body)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatalf("send %s: %v", body, err)
	}
}

func ptrTo[T any](v T) *T { return &v }

// freshSource is a source of one partition with batch.max_wait at
// maxWaitNeverReached (the ownership expiration above it, as validation
// requires) and batch set as given.
func freshSource(t *testing.T, ctx context.Context, conn string, conns int, batch source.Batch) *source.Source {
	t.Helper()
	batch.MaxWait = maxWaitNeverReached
	return newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t), Settings: source.Settings{
		Connections: conns, Batch: batch,
		LoadBalancing: source.LoadBalancing{Strategy: "greedy", UpdateInterval: time.Second, OwnershipExpiration: 2 * time.Minute}}})
}

// TestLiveEventIsHandedOverAtOnce: an event sent to an idle partition is
// handed over by the receive that is waiting, alone, not when
// batch.max_wait (30 s) has passed waiting for a full batch; and so is
// the next one. The whole test is bounded far below max_wait. It runs
// on the processor's connection and on a reader connection (whose first
// receive is special: it attaches the link).
func TestLiveEventIsHandedOverAtOnce(t *testing.T) {
	ctx := testContext(t)
	for _, conns := range []int{1, 2} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "live", Partitions: 1}}})
			conn := srv.ConnectionString("live")
			producer := newProducer(t, conn)
			src := freshSource(t, ctx, conn, conns, source.Batch{})
			bctx, cancel := context.WithTimeout(ctx, maxWaitNeverReached*2/3)
			defer cancel()
			tap := newBatchTap()
			r := run(t, bctx, src, tap.handle)
			waitFor(t, bctx, tap.claimed, r, "the partition's claim", func() string { return "" })
			for i, body := range []string{"first", "second", "third"} {
				sendOne(t, bctx, producer, body)
				batch := tap.next(t, bctx, r, "the batch of event "+body)
				if len(batch) != 1 || string(batch[0].Body) != body || batch[0].SequenceNumber != int64(i) {
					t.Fatalf("batch %d: %d events (first %q), want event %q alone at sequence number %d", i+1, len(batch), batch[0].Body, body, i)
				}
			}
			if err := r.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}
