package emulator

import (
	"context"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func TestSDKHubAndPartitionProperties(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	for _, client := range []string{"producer", "consumer"} {
		t.Run(client, func(t *testing.T) {
			type propsGetter interface {
				GetEventHubProperties(ctx context.Context, o *azeventhubs.GetEventHubPropertiesOptions) (azeventhubs.EventHubProperties, error)
				GetPartitionProperties(ctx context.Context, id string, o *azeventhubs.GetPartitionPropertiesOptions) (azeventhubs.PartitionProperties, error)
			}
			var g propsGetter
			if client == "producer" {
				g = newProducer(t, srv, "orders")
			} else {
				g = newConsumer(t, srv, "orders", "", nil)
			}
			hp, err := g.GetEventHubProperties(ctx, nil)
			if err != nil {
				t.Fatalf("GetEventHubProperties: %v", err)
			}
			if hp.Name != "orders" || len(hp.PartitionIDs) != 4 || hp.PartitionIDs[3] != "3" || hp.CreatedOn.IsZero() {
				t.Fatalf("hub properties = %+v", hp)
			}
			pp, err := g.GetPartitionProperties(ctx, "2", nil)
			if err != nil {
				t.Fatalf("GetPartitionProperties: %v", err)
			}
			if pp.EventHubName != "orders" || pp.PartitionID != "2" || !pp.IsEmpty || pp.LastEnqueuedSequenceNumber != -1 {
				t.Fatalf("partition properties = %+v", pp)
			}
			if _, err := g.GetPartitionProperties(ctx, "9", nil); err == nil {
				t.Fatal("GetPartitionProperties of an unknown partition succeeded")
			}
		})
	}
}

func TestSDKSendAndReceive(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("1")}, "a", "b", "c")
	pp, err := p.GetPartitionProperties(ctx, "1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp.LastEnqueuedSequenceNumber != 2 || pp.IsEmpty {
		t.Fatalf("after send: %+v", pp)
	}
	c := newConsumer(t, srv, "orders", "", nil)
	pc, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	evs := receiveN(t, pc, 3)
	for i, want := range []string{"a", "b", "c"} {
		if string(evs[i].Body) != want || evs[i].SequenceNumber != int64(i) {
			t.Fatalf("event %d = %q seq %d", i, evs[i].Body, evs[i].SequenceNumber)
		}
		if evs[i].PartitionKey != nil || evs[i].EnqueuedTime == nil {
			t.Fatalf("event %d: key %v, enqueued %v", i, evs[i].PartitionKey, evs[i].EnqueuedTime)
		}
	}
}
