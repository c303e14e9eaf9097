package emulator_test

import (
	"context"
	"fmt"
	"log"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
)

// Example runs an emulator in-process and uses it with the real SDK:
// send one event, then read it back from the earliest position.
func Example() {
	ctx := context.Background()
	srv, err := emulator.Start(ctx, emulator.Config{
		Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown(ctx)

	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close(ctx)
	batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: new("0")})
	if err != nil {
		log.Fatal(err)
	}
	if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(`{"order_id":1}`)}, nil); err != nil {
		log.Fatal(err)
	}
	if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		log.Fatal(err)
	}

	consumer, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString("orders"), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)
	pc, err := consumer.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{
		StartPosition: azeventhubs.StartPosition{Earliest: new(true)},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer pc.Close(ctx)
	events, err := pc.ReceiveEvents(ctx, 1, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(events[0].SequenceNumber, string(events[0].Body))
	// Output: 0 {"order_id":1}
}
