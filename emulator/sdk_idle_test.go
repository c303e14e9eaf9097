package emulator

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// TestSDKIdleConsumerSurvives keeps a consumer waiting with no events for
// 65 s, past the SDK's 60 s read deadline: the server's heartbeats must
// keep the connection, so the event sent afterwards arrives on the same
// link without recovery. It waits on ReceiveEvents' ctx, not on sleeps,
// beside the package's other tests (it uses no CPU meanwhile). Skipped
// with -short because it takes 65 s by design.
func TestSDKIdleConsumerSurvives(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 65 s; run without -short")
	}
	t.Parallel()
	srv := startEmulator(t, Config{})
	p := newProducer(t, srv, "orders")
	c := newConsumer(t, srv, "orders", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	// Attach first, so the connection count covers the idle period only.
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, "first")
	receiveN(t, pc, 1)
	before := srv.connsAccepted()
	idleCtx, idleCancel := context.WithTimeout(ctx, 65*time.Second)
	evs, err := pc.ReceiveEvents(idleCtx, 1, nil)
	idleCancel()
	if len(evs) != 0 || idleCtx.Err() == nil {
		t.Fatalf("idle receive returned %d events, err %v", len(evs), err)
	}
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("0")}, "wake")
	ev := receiveN(t, pc, 1)[0]
	if string(ev.Body) != "wake" {
		t.Fatalf("got %q", ev.Body)
	}
	if after := srv.connsAccepted(); after != before || srv.connDrops() != 0 {
		t.Fatalf("the idle period cost a reconnect: %d connections accepted before, %d after, %d dropped", before, after, srv.connDrops())
	}
}
