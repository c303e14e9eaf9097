package emulator

import (
	"bytes"
	"errors"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// TestSDKSendToAny mirrors the SDK's TestProducerClient_SendToAny: events
// sent with a key, without, and to a partition arrive with their
// properties, and x-opt-partition-key appears only for keyed sends.
func TestSDKSendToAny(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *azeventhubs.EventDataBatchOptions
	}{
		{"any partition", nil},
		{"partition key", &azeventhubs.EventDataBatchOptions{PartitionKey: ptr("my-key")}},
		{"partition id", &azeventhubs.EventDataBatchOptions{PartitionID: ptr("3")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startEmulator(t, Config{})
			ctx := testCtx(t)
			p := newProducer(t, srv, "orders")
			batch, err := p.NewEventDataBatch(ctx, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			ev := &azeventhubs.EventData{
				Body:          []byte("hello"),
				ContentType:   ptr("application/json"),
				CorrelationID: "corr-1",
				MessageID:     ptr("msg-1"),
				Properties:    map[string]any{"prop": int64(7), "s": "v"},
			}
			if err := batch.AddEventData(ev, nil); err != nil {
				t.Fatal(err)
			}
			if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
				t.Fatal(err)
			}
			// Find the partition holding the event.
			part := ""
			for _, id := range []string{"0", "1", "2", "3"} {
				pp, err := p.GetPartitionProperties(ctx, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !pp.IsEmpty {
					if part != "" {
						t.Fatalf("event in partitions %s and %s", part, id)
					}
					part = id
				}
			}
			if tc.opts != nil && tc.opts.PartitionID != nil && part != *tc.opts.PartitionID {
				t.Fatalf("event went to partition %q, want %q", part, *tc.opts.PartitionID)
			}
			c := newConsumer(t, srv, "orders", "", nil)
			pc, err := c.NewPartitionClient(part, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close(ctx)
			got := receiveN(t, pc, 1)[0]
			if string(got.Body) != "hello" || *got.ContentType != "application/json" || got.CorrelationID != "corr-1" || *got.MessageID != "msg-1" {
				t.Fatalf("received %+v", got.EventData)
			}
			if got.Properties["prop"] != int64(7) || got.Properties["s"] != "v" {
				t.Fatalf("properties = %v", got.Properties)
			}
			if got.SequenceNumber != 0 || got.Offset == "" || got.EnqueuedTime == nil {
				t.Fatalf("seq %d offset %q enqueued %v", got.SequenceNumber, got.Offset, got.EnqueuedTime)
			}
			wantKey := tc.opts != nil && tc.opts.PartitionKey != nil
			if (got.PartitionKey != nil) != wantKey || wantKey && *got.PartitionKey != "my-key" {
				t.Fatalf("partition key = %v, want key: %v", got.PartitionKey, wantKey)
			}
		})
	}
}

// TestSDKAnnotatedMessages mirrors TestProducerClient_AMQPAnnotatedMessages:
// value, sequence and multi-data bodies, user annotations and footers
// survive the batch envelope and the annotation merge.
func TestSDKAnnotatedMessages(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []*azeventhubs.AMQPAnnotatedMessage{
		{Body: azeventhubs.AMQPAnnotatedMessageBody{Value: "a value"},
			MessageAnnotations: map[any]any{"messageAnnotation1": int64(101)},
			Footer:             map[any]any{"footerKey": "footerValue"}},
		{Body: azeventhubs.AMQPAnnotatedMessageBody{Sequence: [][]any{{"s1", int64(2)}, {"s3"}}}},
		{Body: azeventhubs.AMQPAnnotatedMessageBody{Data: [][]byte{[]byte("d1"), []byte("d2")}},
			Properties: &azeventhubs.AMQPAnnotatedMessageProperties{GroupID: ptr("group")}},
	}
	for _, m := range msgs {
		if err := batch.AddAMQPAnnotatedMessage(m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, srv, "orders", "", nil)
	pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	evs := receiveN(t, pc, 3)
	raw0 := evs[0].RawAMQPMessage
	if raw0.Body.Value != "a value" || raw0.MessageAnnotations["messageAnnotation1"] != int64(101) || raw0.Footer["footerKey"] != "footerValue" {
		t.Fatalf("event 0 = %+v", raw0)
	}
	if seq := evs[1].RawAMQPMessage.Body.Sequence; len(seq) != 2 || seq[0][0] != "s1" || seq[0][1] != int64(2) {
		t.Fatalf("event 1 sequence = %v", seq)
	}
	raw2 := evs[2].RawAMQPMessage
	if len(raw2.Body.Data) != 2 || string(raw2.Body.Data[1]) != "d2" || *raw2.Properties.GroupID != "group" {
		t.Fatalf("event 2 = %+v", raw2)
	}
	for i, ev := range evs {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d has sequence number %d", i, ev.SequenceNumber)
		}
	}
}

// TestSDKOversizedEventRefused checks that the advertised max-message-size
// reaches the SDK: AddEventData refuses an event that does not fit.
func TestSDKOversizedEventRefused(t *testing.T) {
	srv := startEmulator(t, Config{MaxMessageSize: 4096})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	batch, err := p.NewEventDataBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.AddEventData(&azeventhubs.EventData{Body: make([]byte, 100)}, nil); err != nil {
		t.Fatalf("small event: %v", err)
	}
	err = batch.AddEventData(&azeventhubs.EventData{Body: make([]byte, 8192)}, nil)
	if !errors.Is(err, azeventhubs.ErrEventDataTooLarge) {
		t.Fatalf("oversized AddEventData = %v, want ErrEventDataTooLarge", err)
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
}

// TestSDKUnknownHubFailsFast: an unknown hub is amqp:not-found, which the
// SDK treats as fatal (no retries).
func TestSDKUnknownHubFailsFast(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "nope")
	if _, err := p.GetEventHubProperties(ctx, nil); err == nil {
		t.Fatal("GetEventHubProperties of an unknown hub succeeded")
	}
	if _, err := p.NewEventDataBatch(ctx, nil); err == nil {
		t.Fatal("NewEventDataBatch on an unknown hub succeeded")
	}
	c := newConsumer(t, srv, "orders", "undeclared", nil)
	pc, err := c.NewPartitionClient("0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if _, err := pc.ReceiveEvents(ctx, 1, nil); err == nil {
		t.Fatal("ReceiveEvents on an undeclared consumer group succeeded")
	}
}

// TestSDKServerBusy: sends during ServerBusy are rejected with
// com.microsoft:server-busy and succeed once it ends.
func TestSDKServerBusy(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", &azeventhubs.ProducerClientOptions{
		RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	sendEvents(t, p, nil, "before")
	srv.ServerBusy(testTimeout)
	batch, err := p.NewEventDataBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte("x")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err == nil {
		t.Fatal("send during ServerBusy succeeded")
	}
	srv.ServerBusy(0)
	sendEvents(t, p, nil, "after")
}

// TestSDKLargeEventsMultiFrame sends events larger than a frame in both
// directions (the client splits at 64 KiB on send, the server at the
// client's max-frame-size on receive).
func TestSDKLargeEventsMultiFrame(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")})
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for i := 0; i < 3; i++ {
		if err := batch.AddEventData(&azeventhubs.EventData{Body: big[:len(big)-i]}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, srv, "orders", "", nil)
	pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	for i, ev := range receiveN(t, pc, 3) {
		if !bytes.Equal(ev.Body, big[:len(big)-i]) {
			t.Fatalf("event %d: %d bytes differ from the %d sent", i, len(ev.Body), len(big)-i)
		}
	}
}
