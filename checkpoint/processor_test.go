package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
)

type received struct {
	partition string
	seq       int64
}

// runProcessor runs the SDK's Processor over store until ctx ends, sending
// every event it receives on out and checkpointing after each batch. The
// returned channel is closed when everything it started has exited.
func runProcessor(ctx context.Context, t *testing.T, connStr string, store azeventhubs.CheckpointStore, out chan<- received) <-chan struct{} {
	t.Helper()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	proc, err := azeventhubs.NewProcessor(cc, store, &azeventhubs.ProcessorOptions{
		UpdateInterval:              200 * time.Millisecond,
		PartitionExpirationDuration: 5 * time.Second,
		StartPositions:              azeventhubs.StartPositions{Default: azeventhubs.StartPosition{Earliest: ptr(true)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := proc.Run(ctx); err != nil {
			t.Errorf("Processor.Run: %v", err)
		}
	})
	go func() {
		defer close(done)
		defer cc.Close(context.Background())
		defer wg.Wait()
		for {
			pc := proc.NextPartitionClient(ctx)
			if pc == nil {
				return
			}
			wg.Go(func() {
				defer pc.Close(context.Background())
				for {
					// ReceiveEvents returns only when it has count events or its
					// ctx ends; a short window hands over what has arrived.
					rctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
					evs, err := pc.ReceiveEvents(rctx, 100, nil)
					cancel()
					if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
						err = nil
					}
					// Checkpoint before reporting: the caller stops the
					// processor as soon as it has seen the last event, and the
					// restart must find that event's checkpoint.
					if len(evs) > 0 {
						if err := pc.UpdateCheckpoint(ctx, evs[len(evs)-1], nil); err != nil && ctx.Err() == nil {
							t.Errorf("UpdateCheckpoint: %v", err)
						}
					}
					for _, ev := range evs {
						select {
						case out <- received{pc.PartitionID(), ev.SequenceNumber}:
						case <-ctx.Done():
							return
						}
					}
					var ehErr *azeventhubs.Error
					if err != nil && (ctx.Err() != nil || errors.As(err, &ehErr) && ehErr.Code == azeventhubs.ErrorCodeOwnershipLost) {
						return
					}
				}
			})
		}
	}()
	return done
}

// consume runs one Processor until want events arrived and returns them
// per partition, in arrival order.
func consume(t *testing.T, connStr string, store azeventhubs.CheckpointStore, want int) map[string][]int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan received)
	done := runProcessor(ctx, t, connStr, store, out)
	defer func() { cancel(); <-done }()
	deadline, stop := context.WithTimeout(context.Background(), 60*time.Second)
	defer stop()
	got := map[string][]int64{}
	for n := 0; n < want; n++ {
		select {
		case r := <-out:
			got[r.partition] = append(got[r.partition], r.seq)
		case <-deadline.Done():
			t.Fatalf("waited for %d events, got %d: %v", want, n, got)
		}
	}
	return got
}

func seqs(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TestProcessorResumesThroughStores runs the SDK's Processor against the
// in-process emulator over Lowercase(FileStore): partition 2 resumes from a
// checkpoint the Go SDK wrote under "$Default", the others from the start;
// a restart resumes from the checkpoints just written, which are under the
// lowercase names. (The merge with sink watermarks is the source's, tested
// in package source against the emulator.)
func TestProcessorResumesThroughStores(t *testing.T) {
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
	connStr := srv.ConnectionString("orders")
	ns := srv.Addr() // the SDK's FullyQualifiedNamespace for an emulator endpoint

	send := func(n int) {
		t.Helper()
		p, err := azeventhubs.NewProducerClientFromConnectionString(connStr, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(context.Background())
		for _, pid := range []string{"0", "1", "2", "3"} {
			b, err := p.NewEventDataBatch(context.Background(), &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if err := b.AddEventData(&azeventhubs.EventData{Body: []byte(fmt.Sprint(i))}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.SendEventDataBatch(context.Background(), b, nil); err != nil {
				t.Fatalf("send to partition %s: %v", pid, err)
			}
		}
	}
	send(10)

	fs := newFileStore(t)
	// The Go SDK wrote this one as configured, "$Default". Offsets of
	// another naming are not ours to guess; an SDK-written checkpoint has
	// one, so read it from the hub.
	pc, err := azeventhubs.NewConsumerClientFromConnectionString(connStr, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	part, err := pc.NewPartitionClient("2", &azeventhubs.PartitionClientOptions{StartPosition: azeventhubs.StartPosition{SequenceNumber: ptr[int64](6), Inclusive: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	evs, err := part.ReceiveEvents(ctx, 1, nil)
	cancel()
	part.Close(context.Background())
	pc.Close(context.Background())
	if err != nil || len(evs) != 1 || evs[0].SequenceNumber != 6 {
		t.Fatalf("reading event 6 of partition 2: %v, %d events", err, len(evs))
	}
	legacy := azeventhubs.Checkpoint{FullyQualifiedNamespace: ns, EventHubName: "orders", ConsumerGroup: "$Default", PartitionID: "2",
		SequenceNumber: ptr[int64](6), Offset: &evs[0].Offset}
	if err := fs.SetCheckpoint(context.Background(), legacy, nil); err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(fs, nil)

	got := consume(t, connStr, store, 10+10+3+10)
	want := map[string][]int64{"0": seqs(0, 9), "1": seqs(0, 9), "2": seqs(7, 9), "3": seqs(0, 9)}
	for pid, w := range want {
		if !slices.Equal(got[pid], w) {
			t.Errorf("first run, partition %s: got %v, want %v", pid, got[pid], w)
		}
	}

	// The processor's checkpoints are under the lowercase names, and
	// copied under the namespace without the emulator's port.
	for _, dir := range []string{ns, "127.0.0.1"} {
		if _, err := os.Stat(filepath.Join(fs.Dir(), dir, "orders", "$default", "checkpoint", "3")); err != nil {
			t.Errorf("no lowercase checkpoint for partition 3: %v", err)
		}
	}

	send(1)
	got = consume(t, connStr, store, 4)
	for _, pid := range []string{"0", "1", "2", "3"} {
		if !slices.Equal(got[pid], []int64{10}) {
			t.Errorf("after restart, partition %s: got %v, want [10]", pid, got[pid])
		}
	}
}
