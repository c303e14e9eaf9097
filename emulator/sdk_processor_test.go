package emulator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// consumed records which processor read which (partition, sequence number).
type consumed struct {
	mu     sync.Mutex // guards seen
	seen   map[string]int
	update chan struct{} // cap 1; signalled on every new event
}

func (c *consumed) add(partition string, seq int64) {
	c.mu.Lock()
	c.seen[fmt.Sprintf("%s/%d", partition, seq)]++
	c.mu.Unlock()
	select {
	case c.update <- struct{}{}:
	default:
	}
}

func (c *consumed) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// runProcessor runs a Processor until ctx ends, recording every event and
// checkpointing after each batch. It returns a channel closed on exit.
func runProcessor(ctx context.Context, t *testing.T, srv *Server, store *memCheckpointStore, rec *consumed) <-chan struct{} {
	t.Helper()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString("orders"), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := azeventhubs.NewProcessor(cc, store, &azeventhubs.ProcessorOptions{
		LoadBalancingStrategy:       azeventhubs.ProcessorStrategyBalanced,
		UpdateInterval:              200 * time.Millisecond,
		PartitionExpirationDuration: 2 * time.Second,
		StartPositions:              azeventhubs.StartPositions{Default: azeventhubs.StartPosition{Earliest: ptr(true)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	go func() {
		defer close(done)
		defer cc.Close(context.Background())
		defer wg.Wait()
		for {
			pc := proc.NextPartitionClient(ctx)
			if pc == nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer pc.Close(context.Background())
				for {
					// ReceiveEvents waits for all 100 events or its ctx:
					// a short ctx returns what has arrived (SDK example
					// pattern); expiring is not an error here.
					rctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
					evs, err := pc.ReceiveEvents(rctx, 100, nil)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
						err = nil
					}
					for _, ev := range evs {
						rec.add(pc.PartitionID(), ev.SequenceNumber)
					}
					if len(evs) > 0 {
						if err := pc.UpdateCheckpoint(ctx, evs[len(evs)-1], nil); err != nil && ctx.Err() == nil {
							t.Logf("UpdateCheckpoint: %v", err)
						}
					}
					if err != nil && ctx.Err() == nil {
						t.Logf("partition %s: ReceiveEvents: %v", pc.PartitionID(), err)
					}
					var ehErr *azeventhubs.Error
					if err != nil && (ctx.Err() != nil || errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeOwnershipLost) {
						return
					}
				}
			}()
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := proc.Run(ctx); err != nil {
			t.Errorf("Processor.Run: %v", err)
		}
	}()
	return done
}

// waitFor waits, re-checking on every event or tick, until cond holds or
// the test deadline passes. It is a wait, not a timing assertion.
func waitFor(t *testing.T, what string, rec *consumed, cond func() bool) {
	t.Helper()
	ctx := testCtx(t)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-rec.update:
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (%d distinct events consumed)", what, rec.distinct())
		}
	}
}

// TestSDKProcessorsSplitPartitions runs two and three Processors over a
// 4-partition hub: they split the partitions evenly, consume every event,
// and when one stops the others take its partitions over.
func TestSDKProcessorsSplitPartitions(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n, " processors"), func(t *testing.T) {
			srv := startEmulator(t, Config{})
			p := newProducer(t, srv, "orders")
			for i := 0; i < 4; i++ {
				sendNumbered(t, p, fmt.Sprint(i), 0, 25)
			}
			store := newMemCheckpointStore()
			rec := &consumed{seen: map[string]int{}, update: make(chan struct{}, 1)}
			cancels := make([]context.CancelFunc, n)
			dones := make([]<-chan struct{}, n)
			for i := range n {
				ctx, cancel := context.WithCancel(context.Background())
				cancels[i] = cancel
				dones[i] = runProcessor(ctx, t, srv, store, rec)
			}
			t.Cleanup(func() {
				for i := range n {
					cancels[i]()
					<-dones[i]
				}
			})
			waitFor(t, "first 100 events", rec, func() bool { return rec.distinct() == 100 })
			waitFor(t, "balanced ownership", rec, func() bool {
				owners := store.owners(2 * time.Second)
				if len(owners) != n {
					return false
				}
				for _, cnt := range owners {
					if cnt < 4/n || cnt > (4+n-1)/n {
						return false
					}
				}
				return true
			})
			// Stop the last processor; the others take its partitions.
			cancels[n-1]()
			<-dones[n-1]
			for i := 0; i < 4; i++ {
				sendNumbered(t, p, fmt.Sprint(i), 25, 25)
			}
			waitFor(t, "all 200 events after the handover", rec, func() bool { return rec.distinct() == 200 })
		})
	}
}
