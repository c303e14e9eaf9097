package hub

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// clock is an injectable, manually advanced clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 678_900_000, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openNS(t testing.TB, cfg Config) *Namespace {
	t.Helper()
	if cfg.Hubs == nil {
		cfg.Hubs = []HubConfig{{Name: "orders", Partitions: 4, ConsumerGroups: []string{"cg1"}}}
	}
	n, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func mustHub(t testing.TB, n *Namespace, name string) *Hub {
	t.Helper()
	h, err := n.Hub(name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func msg(i int) []byte { return []byte(fmt.Sprintf("message-%06d", i)) }

func ptr[T any](v T) *T { return &v }

// drain reads exactly n events from r, failing the test on error.
func drain(t testing.TB, r *Receiver, n int) []Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []Event
	for len(out) < n {
		evs, err := r.Next(ctx, n-len(out))
		if err != nil {
			t.Fatalf("Next after %d of %d events: %v", len(out), n, err)
		}
		out = append(out, evs...)
	}
	return out
}

// readAll opens a receiver from earliest and reads every retained event.
func readAll(t testing.TB, h *Hub, partition string) []Event {
	t.Helper()
	pp, err := h.PartitionProperties(partition)
	if err != nil {
		t.Fatal(err)
	}
	r, err := h.OpenReceiver(ReceiverOptions{Partition: partition, Name: "readAll", Start: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if pp.IsEmpty {
		return nil
	}
	return drain(t, r, int(pp.LastEnqueuedSequenceNumber-pp.BeginSequenceNumber+1))
}

// assertNoEvent checks that Next has nothing to return right now.
func assertNoEvent(t testing.TB, r *Receiver) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if evs, err := r.Next(ctx, 10); err != context.Canceled {
		t.Fatalf("Next = %d events, %v; want no event (context.Canceled)", len(evs), err)
	}
}
