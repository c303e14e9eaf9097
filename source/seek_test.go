package source_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// TestSeekReadsOnAfterPosition: Seek moves a claimed partition's reading
// to just after a position, forward by sequence number and back by
// offset, on the processor's connection (connections 1) and on a reader
// connection (2), with the lease kept: every Receive after a Seek starts
// right after its position and nothing reports the partition lost.
func TestSeekReadsOnAfterPosition(t *testing.T) {
	for _, conns := range []int{1, 2} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			ctx := testContext(t)
			srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 2}}})
			conn := srv.ConnectionString("orders")
			sendLines(t, ctx, newProducer(t, conn), 300, "e")
			src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: fileStore(t),
				Settings: source.Settings{Connections: conns, Batch: source.Batch{MaxEvents: 40}}})
			done := make(chan error, 1)
			r := run(t, ctx, src, func(ctx context.Context, p *source.Partition) error {
				if p.ID() != "0" {
					<-ctx.Done()
					return nil
				}
				done <- seekAround(ctx, p)
				<-ctx.Done()
				return nil
			})
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-r.done:
				t.Fatalf("Run returned %v before the handler was done", r.err)
			case <-ctx.Done():
				t.Fatal("gave up waiting for partition 0's handler")
			}
		})
	}
}

// seekAround reads partition 0 (300 events): 50 or more, a seek forward
// past seq 199, then back after the tenth event's offset, then to the end.
func seekAround(ctx context.Context, p *source.Partition) error {
	readTo := func(last int64) ([]sinks.Event, error) {
		var got []sinks.Event
		for len(got) == 0 || got[len(got)-1].SequenceNumber < last {
			evs, err := p.Receive(ctx)
			if err != nil {
				return got, err
			}
			got = append(got, evs...)
		}
		return got, nil
	}
	contiguous := func(evs []sinks.Event, from int64) error {
		for i, e := range evs {
			if e.SequenceNumber != from+int64(i) {
				return fmt.Errorf("event %d after the seek is seq %d, want %d", i, e.SequenceNumber, from+int64(i))
			}
		}
		return nil
	}
	first, err := readTo(49)
	if err != nil {
		return fmt.Errorf("before the seeks: %w", err)
	}
	if err := contiguous(first, 0); err != nil {
		return err
	}
	if err := p.Seek(sinks.Position{SequenceNumber: 199}); err != nil {
		return err
	}
	ahead, err := readTo(200)
	if err != nil {
		return fmt.Errorf("after the seek forward: %w", err)
	}
	if err := contiguous(ahead, 200); err != nil {
		return fmt.Errorf("forward by sequence number: %w", err)
	}
	tenth := first[9]
	if err := p.Seek(sinks.Position{SequenceNumber: tenth.SequenceNumber, Offset: tenth.Offset}); err != nil {
		return err
	}
	rest, err := readTo(299)
	if err != nil {
		return fmt.Errorf("after the seek back: %w", err)
	}
	if err := contiguous(rest, 10); err != nil {
		return fmt.Errorf("back by offset: %w", err)
	}
	if len(rest) != 290 {
		return fmt.Errorf("%d events after the seek back, want 290", len(rest))
	}
	return nil
}
