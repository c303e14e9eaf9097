package produce

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
)

// TestDemoMemoryBoundedByPending sends demo orders over many keys at two
// counts, ten times apart, and checks that the bytes held unsent never
// passed the bound at either: what Demo holds depends on MaxPendingBytes,
// not on Count (without the bound, each key keeps up to a full 1 MiB batch).
func TestDemoMemoryBoundedByPending(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = producer.Close(context.Background()) })

	const (
		bound    = 32 << 10
		maxEvent = 1 << 10 // a demo order with its AMQP framing is well under this
	)
	total := 0
	for _, count := range []int{2_000, 20_000} {
		b := newBatcher(producer, bound)
		n, err := demo(t.Context(), b, DemoOptions{Count: count, Keys: 200, Seed: 5})
		if err != nil || n != count {
			t.Fatalf("count %d: sent %d, err %v", count, n, err)
		}
		if b.peakPending == 0 || b.peakPending > bound+maxEvent {
			t.Errorf("count %d: held up to %d bytes unsent, want at most %d", count, b.peakPending, bound+maxEvent)
		}
		if b.pending != 0 || len(b.batches) != 0 {
			t.Errorf("count %d: %d bytes in %d batches left after the end", count, b.pending, len(b.batches))
		}
		t.Logf("count %d: peak %d bytes unsent", count, b.peakPending)
		total += count
	}

	// every order arrived: the early sends lost nothing
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString("orders"), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close(ctx)
	got := 0
	for _, id := range []string{"0", "1", "2", "3"} {
		pp, err := cc.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !pp.IsEmpty {
			got += int(pp.LastEnqueuedSequenceNumber - pp.BeginningSequenceNumber + 1)
		}
	}
	if got != total {
		t.Errorf("the hub holds %d events, want %d", got, total)
	}
}
