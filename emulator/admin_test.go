package emulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

func adminPost(t *testing.T, srv *Server, path string) map[string]any {
	t.Helper()
	resp, err := http.Post("http://"+srv.AdminAddr()+path, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
	}
	return out
}

// TestAdminServer drives the fault endpoints against a live SDK consumer.
func TestAdminServer(t *testing.T) {
	srv := startEmulator(t, Config{AdminAddr: "127.0.0.1:0"})
	resp, err := http.Get("http://" + srv.AdminAddr() + "/health")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health: %d", resp.StatusCode)
	}
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	sendNumbered(t, p, "0", 0, 2)
	c := newConsumer(t, srv, "orders", "", nil)
	pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	receiveN(t, pc, 2)
	if out := adminPost(t, srv, "/faults/detach?hub=orders&partition=0"); out["detached"] != float64(1) {
		t.Fatalf("detach: %v", out)
	}
	adminPost(t, srv, "/faults/latency?duration=1ms")
	adminPost(t, srv, "/faults/server-busy?duration=0s")
	sendNumbered(t, p, "0", 2, 1)
	if ev := receiveN(t, pc, 1)[0]; ev.SequenceNumber != 2 {
		t.Fatalf("after the forced detach got seq %d, want 2", ev.SequenceNumber)
	}
	if out := adminPost(t, srv, "/faults/drop-connections"); out["dropped"].(float64) < 1 {
		t.Fatalf("drop-connections: %v", out)
	}
	noRetry := newConsumer(t, srv, "orders", "", &azeventhubs.ConsumerClientOptions{RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}})
	adminPost(t, srv, "/faults/partition-properties?count=1")
	if _, err := noRetry.GetPartitionProperties(ctx, "0", nil); err == nil {
		t.Fatal("partition properties answered while a failure was injected")
	}
	if _, err := noRetry.GetPartitionProperties(ctx, "0", nil); err != nil {
		t.Fatalf("partition properties after the injected failure: %v", err)
	}
	// Growing the hub: the SDK reads the new partitions and receives on them.
	before, err := c.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	grown := len(before.PartitionIDs) + 2
	adminPost(t, srv, fmt.Sprintf("/hubs/partitions?hub=orders&count=%d", grown))
	after, err := c.GetEventHubProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.PartitionIDs) != grown {
		t.Fatalf("after growing to %d partitions the hub's properties list %v", grown, after.PartitionIDs)
	}
	last := after.PartitionIDs[grown-1]
	sendNumbered(t, p, last, 0, 1)
	npc, err := c.NewPartitionClient(last, &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer npc.Close(ctx)
	receiveN(t, npc, 1)
	for _, bad := range []string{"/hubs/partitions?hub=orders&count=1", "/hubs/partitions?hub=nope&count=9", "/faults/latency?duration=soon"} {
		resp, err := http.Post("http://"+srv.AdminAddr()+bad, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("POST %s: %d, want 400", bad, resp.StatusCode)
		}
	}
}
