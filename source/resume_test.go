package source_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// sendLines sends n events to partition 0 of hub.
func sendLines(t *testing.T, ctx context.Context, p *azeventhubs.ProducerClient, n int, prefix string) {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s-%d\n", prefix, i)
	}
	if got, err := produce.Lines(ctx, p, strings.NewReader(b.String()), produce.LinesOptions{PartitionID: "0"}); err != nil || got != n {
		t.Fatalf("Lines sent %d, %v", got, err)
	}
}

func setCheckpoint(t *testing.T, ctx context.Context, store azeventhubs.CheckpointStore, conn, hub, partition string, seq int64) {
	t.Helper()
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}
	off := fmt.Sprint(seq * 1000) // an offset the emulator never issued
	if err := store.SetCheckpoint(ctx, azeventhubs.Checkpoint{
		FullyQualifiedNamespace: props.FullyQualifiedNamespace, EventHubName: hub, ConsumerGroup: azeventhubs.DefaultConsumerGroup,
		PartitionID: partition, SequenceNumber: &seq, Offset: &off,
	}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidCheckpointPolicies: a checkpoint past the partition's last event
// (the hub was recreated) stops Run with a clear error under "fail", and
// restarts from the first or after the last event under "earliest" and
// "latest".
func TestInvalidCheckpointPolicies(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 1}}})
	conn := srv.ConnectionString("orders")
	producer := newProducer(t, conn)
	sendLines(t, ctx, producer, 10, "old")

	t.Run("fail", func(t *testing.T) {
		store := fileStore(t)
		setCheckpoint(t, ctx, store, conn, "orders", "0", 5000)
		src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store})
		rec := newRecorder(0)
		r := run(t, ctx, src, rec.handle)
		select {
		case <-r.done:
		case <-ctx.Done():
			t.Fatal("Run kept going with a checkpoint past the end of the partition")
		}
		err := r.err
		t.Logf("Run: %v", err)
		if !errors.Is(err, source.ErrInvalidCheckpoint) {
			t.Fatalf("Run = %v, want ErrInvalidCheckpoint", err)
		}
		for _, s := range []string{"partition 0", "5000", "past the last event", "9", "on_invalid_checkpoint"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error does not say %q", s)
			}
		}
		if n := rec.count(); n != 0 {
			t.Errorf("%d events delivered", n)
		}
	})

	for _, tt := range []struct {
		policy    string
		wantFirst int64
	}{{"earliest", 0}, {"latest", 10}} {
		t.Run(tt.policy, func(t *testing.T) {
			store := fileStore(t)
			setCheckpoint(t, ctx, store, conn, "orders", "0", 5000)
			src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{OnInvalidCheckpoint: tt.policy}})
			rec := newRecorder(1)
			r := run(t, ctx, src, rec.handle)
			if tt.policy == "latest" {
				// "latest" is the last event when the partition is claimed
				waitFor(t, ctx, rec.claimed, r, "the claim", func() string { return "none" })
				sendLines(t, ctx, producer, 3, "new")
			}
			waitFor(t, ctx, rec.reached, r, "the first event", func() string { return "none" })
			rec.mu.Lock()
			first := rec.events[0]
			rec.mu.Unlock()
			if first.SequenceNumber != tt.wantFirst {
				t.Errorf("first event %s, want seq %d", first.String(), tt.wantFirst)
			}
		})
	}
}

// TestWatermarkLaterThanCheckpoint: the sink's watermark wins over an older
// checkpoint, so nothing the sink holds is read again.
func TestWatermarkLaterThanCheckpoint(t *testing.T) {
	ctx := testContext(t)
	srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 1}}})
	conn := srv.ConnectionString("orders")
	sendLines(t, ctx, newProducer(t, conn), 20, "e")
	store := fileStore(t)
	setCheckpoint(t, ctx, store, conn, "orders", "0", 4)
	src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store,
		Watermark: func(_ context.Context, partition string) (*sinks.Position, error) {
			return &sinks.Position{SequenceNumber: 11}, nil
		}})
	rec := newRecorder(8)
	r := run(t, ctx, src, rec.handle)
	waitFor(t, ctx, rec.reached, r, "8 events", func() string { return fmt.Sprint(rec.count()) })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if first := rec.events[0].SequenceNumber; first != 12 {
		t.Errorf("resumed at seq %d, want 12 (after the watermark 11, not the checkpoint 4)", first)
	}
}
