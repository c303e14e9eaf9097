package emulator

import (
	"fmt"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// TestSDKRecovery injects faults between two halves of a stream and checks
// the SDK recovers by itself with no event lost or repeated.
func TestSDKRecovery(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(srv *Server) int
	}{
		{"force detach", func(srv *Server) int { return srv.ForceDetach("orders", "0") }},
		{"drop connections", func(srv *Server) int { return srv.DropConnections() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startEmulator(t, Config{})
			ctx := testCtx(t)
			p := newProducer(t, srv, "orders")
			c := newConsumer(t, srv, "orders", "", nil)
			pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{
				StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
				OwnerLevel:    ptr(int64(1)),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close(ctx)
			const half = 50
			sendNumbered(t, p, "0", 0, half)
			got := receiveN(t, pc, half)
			if n := tc.fault(srv); n == 0 {
				t.Fatal("the fault hit nothing")
			}
			// The producer recovers too: its link or connection is gone.
			sendNumbered(t, p, "0", half, half)
			for len(got) < 2*half {
				evs, err := pc.ReceiveEvents(ctx, 2*half-len(got), nil)
				if err != nil {
					t.Logf("ReceiveEvents after the fault: %v (retrying)", err)
					if ctx.Err() != nil {
						t.Fatal(err)
					}
					continue
				}
				got = append(got, evs...)
			}
			for i, ev := range got {
				if ev.SequenceNumber != int64(i) || string(ev.Body) != fmt.Sprint(i) {
					t.Fatalf("event %d: seq %d body %q (lost or repeated)", i, ev.SequenceNumber, ev.Body)
				}
			}
		})
	}
}
