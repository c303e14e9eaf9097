package emulator

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// sendNumbered sends n events "0".."n-1" to a partition in one batch.
func sendNumbered(t *testing.T, p *azeventhubs.ProducerClient, partition string, from, n int) {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprint(from + i)
	}
	sendEvents(t, p, &azeventhubs.EventDataBatchOptions{PartitionID: &partition}, bodies...)
}

// TestSDKReceivePrefetch mirrors TestConsumerClient_ReceiveEvents: every
// prefetch mode (manual credit, default 300, 1, 5) receives all events in
// order, including more than one credit window's worth.
func TestSDKReceivePrefetch(t *testing.T) {
	srv := startEmulator(t, Config{})
	p := newProducer(t, srv, "orders")
	const n = 700 // more than the default credit of 300
	sendNumbered(t, p, "0", 0, n)
	for _, prefetch := range []int32{-1, 0, 1, 5} {
		t.Run(fmt.Sprint("prefetch", prefetch), func(t *testing.T) {
			ctx := testCtx(t)
			c := newConsumer(t, srv, "orders", "", nil)
			pc, err := c.NewPartitionClient("0", &azeventhubs.PartitionClientOptions{
				StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
				Prefetch:      prefetch,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close(ctx)
			evs := receiveN(t, pc, n)
			for i, ev := range evs {
				if ev.SequenceNumber != int64(i) || string(ev.Body) != fmt.Sprint(i) {
					t.Fatalf("event %d: seq %d body %q", i, ev.SequenceNumber, ev.Body)
				}
			}
			// Live tail: an event sent now arrives on the same link.
			sendNumbered(t, p, "0", n, 1)
			if ev := receiveN(t, pc, 1)[0]; ev.SequenceNumber != n {
				t.Fatalf("tailed event seq %d, want %d", ev.SequenceNumber, n)
			}
		})
		// The next subtest reads the tailed event too.
		_ = prefetch
	}
}

// TestSDKStartPositions covers every StartPosition form of §5.3.
func TestSDKStartPositions(t *testing.T) {
	srv := startEmulator(t, Config{})
	p := newProducer(t, srv, "orders")
	ctx := testCtx(t)
	sendNumbered(t, p, "2", 0, 5)
	c := newConsumer(t, srv, "orders", "", nil)
	// Learn offsets and times from an earliest read.
	all := func() []*azeventhubs.ReceivedEventData {
		pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		return receiveN(t, pc, 5)
	}()
	pp, err := p.GetPartitionProperties(ctx, "2", nil)
	if err != nil {
		t.Fatal(err)
	}
	if pp.LastEnqueuedOffset != all[4].Offset || pp.LastEnqueuedSequenceNumber != 4 {
		t.Fatalf("partition properties %+v disagree with the last event (offset %s)", pp, all[4].Offset)
	}
	for _, tc := range []struct {
		name  string
		start azeventhubs.StartPosition
		first int64
	}{
		{"earliest", azeventhubs.StartPosition{Earliest: ptr(true)}, 0},
		{"sequence exclusive", azeventhubs.StartPosition{SequenceNumber: ptr(int64(1))}, 2},
		{"sequence inclusive", azeventhubs.StartPosition{SequenceNumber: ptr(int64(1)), Inclusive: true}, 1},
		{"sequence -1", azeventhubs.StartPosition{SequenceNumber: ptr(int64(-1))}, 0},
		{"offset exclusive", azeventhubs.StartPosition{Offset: ptr(all[2].Offset)}, 3},
		{"offset inclusive", azeventhubs.StartPosition{Offset: ptr(all[2].Offset), Inclusive: true}, 2},
		{"enqueued time inclusive", azeventhubs.StartPosition{EnqueuedTime: all[0].EnqueuedTime, Inclusive: true}, 0},
		{"enqueued time of last, exclusive", azeventhubs.StartPosition{EnqueuedTime: ptr(pp.LastEnqueuedOn)}, 5},
		{"latest", azeventhubs.StartPosition{Latest: ptr(true)}, 5},
		{"default is latest", azeventhubs.StartPosition{}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: tc.start})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close(ctx)
			if tc.first == 5 {
				// Attach first (the position is resolved at attach), then send.
				if evs, _ := pc.ReceiveEvents(shortCtx(t), 1, nil); len(evs) != 0 {
					t.Fatalf("latest position returned old event seq %d", evs[0].SequenceNumber)
				}
				sendNumbered(t, p, "2", 100, 1)
				tc.first = -1
			}
			ev := receiveN(t, pc, 1)[0]
			if tc.first >= 0 && ev.SequenceNumber != tc.first {
				t.Fatalf("first event seq %d, want %d", ev.SequenceNumber, tc.first)
			}
			if tc.first < 0 && string(ev.Body) != "100" {
				t.Fatalf("latest position read %q (seq %d), want the event sent after attach", ev.Body, ev.SequenceNumber)
			}
		})
	}
	t.Run("bad offset refused", func(t *testing.T) {
		pc, err := c.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{Offset: ptr("not-a-number")}})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		if _, err := pc.ReceiveEvents(ctx, 1, nil); err == nil || !strings.Contains(err.Error(), "argument-out-of-range") {
			t.Fatalf("ReceiveEvents with a bad offset = %v, want argument-out-of-range", err)
		}
	})
	t.Run("unknown partition refused", func(t *testing.T) {
		pc, err := c.NewPartitionClient("42", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close(ctx)
		if _, err := pc.ReceiveEvents(ctx, 1, nil); err == nil || !strings.Contains(err.Error(), "argument-out-of-range") {
			t.Fatalf("ReceiveEvents on partition 42 = %v, want argument-out-of-range", err)
		}
	})
}

// TestSDKEpochs mirrors the SDK's epoch tests: same epoch steals, lower
// epoch is refused, and non-epoch readers coexist up to five.
func TestSDKEpochs(t *testing.T) {
	srv := startEmulator(t, Config{})
	p := newProducer(t, srv, "orders")
	sendNumbered(t, p, "1", 0, 3)
	earliest := azeventhubs.StartPosition{Earliest: ptr(true)}

	t.Run("same epoch steals", func(t *testing.T) {
		ctx := testCtx(t)
		c1 := newConsumer(t, srv, "orders", "", &azeventhubs.ConsumerClientOptions{InstanceID: "first"})
		c2 := newConsumer(t, srv, "orders", "", &azeventhubs.ConsumerClientOptions{InstanceID: "second"})
		pc1, err := c1.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(0))})
		if err != nil {
			t.Fatal(err)
		}
		defer pc1.Close(ctx)
		receiveN(t, pc1, 3)
		pc2, err := c2.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(0))})
		if err != nil {
			t.Fatal(err)
		}
		defer pc2.Close(ctx)
		receiveN(t, pc2, 3)
		_, err = pc1.ReceiveEvents(ctx, 1, nil)
		var ehErr *azeventhubs.Error
		if !errors.As(err, &ehErr) || ehErr.Code != azeventhubs.ErrorCodeOwnershipLost {
			t.Fatalf("stolen receiver got %v, want ownership lost", err)
		}
	})

	t.Run("lower epoch refused", func(t *testing.T) {
		ctx := testCtx(t)
		c1 := newConsumer(t, srv, "orders", "", &azeventhubs.ConsumerClientOptions{InstanceID: "high"})
		c2 := newConsumer(t, srv, "orders", "", &azeventhubs.ConsumerClientOptions{
			InstanceID: "low", RetryOptions: azeventhubs.RetryOptions{MaxRetries: -1}})
		pc1, err := c1.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(20))})
		if err != nil {
			t.Fatal(err)
		}
		defer pc1.Close(ctx)
		receiveN(t, pc1, 3)
		pc2, err := c2.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest, OwnerLevel: ptr(int64(10))})
		if err != nil {
			t.Fatal(err)
		}
		defer pc2.Close(ctx)
		_, err = pc2.ReceiveEvents(ctx, 1, nil)
		if err == nil || !strings.Contains(err.Error(), "amqp:link:stolen") ||
			!strings.Contains(err.Error(), "Receiver 'high' with a higher epoch '20' already exists. Receiver 'low' with epoch 10 cannot be created") {
			t.Fatalf("lower epoch ReceiveEvents = %v", err)
		}
	})

	t.Run("concurrent non-epoch readers", func(t *testing.T) {
		ctx := testCtx(t)
		c := newConsumer(t, srv, "orders", "cg1", nil)
		var wg sync.WaitGroup
		errs := make(chan error, 5)
		for i := 0; i < 5; i++ {
			pc, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest})
			if err != nil {
				t.Fatal(err)
			}
			defer pc.Close(ctx)
			wg.Add(1)
			go func() {
				defer wg.Done()
				got := 0
				for got < 3 {
					evs, err := pc.ReceiveEvents(ctx, 3-got, nil)
					if err != nil {
						errs <- err
						return
					}
					got += len(evs)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("non-epoch reader: %v", err)
		}
		// A sixth concurrent non-epoch reader exceeds the service quota.
		sixth, err := c.NewPartitionClient("1", &azeventhubs.PartitionClientOptions{StartPosition: earliest})
		if err != nil {
			t.Fatal(err)
		}
		defer sixth.Close(ctx)
		if _, err := sixth.ReceiveEvents(ctx, 1, nil); err == nil || !strings.Contains(err.Error(), "amqp:resource-limit-exceeded") {
			t.Fatalf("sixth non-epoch reader: %v, want amqp:resource-limit-exceeded", err)
		}
	})
}
