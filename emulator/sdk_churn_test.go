package emulator

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// attachedReceivers counts the partition receiver links attached on any
// connection for hub/partition.
func (s *Server) attachedReceivers(partition string) int {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	n := 0
	for _, c := range conns {
		c.mu.Lock()
		for _, sess := range c.sessions {
			for _, l := range sess.links {
				if !l.detached && l.deliverer != nil && l.deliverer.rcv.Partition() == partition {
					n++
				}
			}
		}
		c.mu.Unlock()
	}
	return n
}

// eventually polls cond until it holds or the test deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSDKPartitionClientChurnKeepsConnection opens and closes
// PartitionClients over and over on one ConsumerClient while another
// PartitionClient of the same client keeps receiving. Closing a
// PartitionClient while transfers still stream in can make go-amqp send
// a flow after its detach; the connection, shared by every link of the
// client, must survive that.
func TestSDKPartitionClientChurnKeepsConnection(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	c := newConsumer(t, srv, "orders", "", nil)
	keeper, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	defer keeper.Close(ctx)
	sendNumbered(t, p, "0", 0, 1)
	receiveN(t, keeper, 1)
	// Enough history that every round reads past the default prefetch of
	// 300: go-amqp then tops up credit on its own, and a top-up racing the
	// close is the late flow.
	const rounds, perRound = 25, 320
	for i := range rounds {
		sendNumbered(t, p, "1", i*perRound, perRound)
	}
	conns := srv.connsAccepted()

	for i := range rounds {
		pc, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		evs := receiveN(t, pc, perRound+i*10)
		if last := evs[len(evs)-1]; last.SequenceNumber != int64(len(evs)-1) {
			t.Fatalf("round %d: event %d has seq %d", i, len(evs)-1, last.SequenceNumber)
		}
		if err := pc.Close(ctx); err != nil {
			t.Fatalf("round %d: close: %v", i, err)
		}
		// The keeper still receives on the same connection.
		sendNumbered(t, p, "0", i+1, 1)
		if ev := receiveN(t, keeper, 1)[0]; ev.SequenceNumber != int64(i+1) {
			t.Fatalf("round %d: keeper got seq %d, want %d", i, ev.SequenceNumber, i+1)
		}
	}
	if got := srv.connsAccepted(); got != conns {
		t.Fatalf("the clients opened %d new connection(s) during the churn; the emulator dropped theirs", got-conns)
	}
}

// TestSDKStartAtLatestLoop runs the "start at latest" probe 20 times on
// one ConsumerClient: a receiver attached at latest sees the event sent
// right after its attach, and the client keeps its one connection
// throughout. It used to fail when the previous round's PartitionClient
// close cost the client its connection, so the next receiver attached
// only after the event, in retry backoff.
func TestSDKStartAtLatestLoop(t *testing.T) {
	srv := startEmulator(t, Config{})
	ctx := testCtx(t)
	p := newProducer(t, srv, "orders")
	c := newConsumer(t, srv, "orders", "", nil)
	sendNumbered(t, p, "2", 0, 10) // history the receivers must not see
	var conns int64
	for i := range 20 {
		pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Latest: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan string, 1)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, testTimeout)
			defer cancel()
			evs, err := pc.ReceiveEvents(rctx, 1, nil)
			switch {
			case err != nil:
				got <- "error: " + err.Error()
			case len(evs) == 0:
				got <- "no event"
			default:
				got <- string(evs[0].Body)
			}
		}()
		// The receive attaches the link; send once the emulator has it.
		eventually(t, "the latest receiver to attach", func() bool { return srv.attachedReceivers("2") == 1 })
		want := fmt.Sprint("latest-", i)
		sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: ptr("2")}, want)
		if body := <-got; body != want {
			t.Fatalf("round %d: receiver at latest read %q, want %q", i, body, want)
		}
		// Read on past the prefetch window before closing, as a consumer
		// that stops mid-stream does: the close then races go-amqp's own
		// credit top-ups, which is what used to cost the next round its
		// connection.
		sendNumbered(t, p, "2", 0, 1000)
		receiveN(t, pc, 350+i)
		if err := pc.Close(ctx); err != nil {
			t.Fatalf("round %d: close: %v", i, err)
		}
		if i == 0 {
			conns = srv.connsAccepted()
		}
	}
	if got := srv.connsAccepted(); got != conns {
		t.Fatalf("the clients opened %d new connection(s) across the rounds; the emulator dropped theirs", got-conns)
	}
}
