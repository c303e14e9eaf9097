package source_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// TestConnections reads 4 partitions over 1 and over 3 reader connections:
// every event arrives once and in order, the partitions are spread over the
// connections (3 connections: 2, 1, 1 partitions), every lease names the
// one owner ID, and a restart resumes after the checkpoints.
func TestConnections(t *testing.T) {
	for _, conns := range []int{1, 3} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			ctx := testContext(t)
			srv := startEmulator(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 4}}})
			conn := srv.ConnectionString("orders")
			producer := newProducer(t, conn)
			const total = 4000
			if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: total, Keys: 50, Seed: 3}); err != nil || n != total {
				t.Fatalf("Demo sent %d, %v; want %d", n, err, total)
			}
			store := fileStore(t)
			src := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{Connections: conns, Batch: source.Batch{MaxEvents: 300}, LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
			rec := newRecorder(total)
			var mu sync.Mutex
			var loads [][]int
			rec.afterAdd = func(*source.Partition, []sinks.Event) {
				mu.Lock()
				loads = append(loads, source.ReaderLoad(src))
				mu.Unlock()
			}
			r := run(t, ctx, src, rec.handle)
			waitFor(t, ctx, rec.reached, r, "4,000 events", func() string { return fmt.Sprintf("%d received", rec.count()) })
			for id, evs := range rec.byPart {
				for i, e := range evs {
					if e.SequenceNumber != int64(i) {
						t.Fatalf("partition %s event %d: seq %d, want %d", id, i, e.SequenceNumber, i)
					}
				}
			}
			checkOncePerKeyInOrder(t, rec.events, total)
			mu.Lock()
			last := loads[len(loads)-1]
			mu.Unlock()
			switch conns {
			case 1:
				if last != nil {
					t.Errorf("connections 1: reader connections %v, want none", last)
				}
			default:
				slices.Sort(last)
				if !slices.Equal(last, []int{1, 1, 2}) {
					t.Errorf("partitions per reader connection %v, want [1 1 2]", last)
				}
			}
			props, err := azeventhubs.ParseConnectionString(conn)
			if err != nil {
				t.Fatal(err)
			}
			owners, err := store.ListOwnership(ctx, props.FullyQualifiedNamespace, "orders", "$Default", nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range owners {
				if o.OwnerID != src.OwnerID() {
					t.Errorf("partition %s owned by %q, want the source's one owner ID %q", o.PartitionID, o.OwnerID, src.OwnerID())
				}
			}
			if len(owners) != 4 {
				t.Errorf("%d leases, want 4", len(owners))
			}
			if err := r.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if err := src.Close(ctx); err != nil {
				t.Fatal(err)
			}

			// A restart resumes after the checkpoints: only the new events.
			if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: 400, Keys: 50, Seed: 4}); err != nil || n != 400 {
				t.Fatalf("Demo sent %d, %v; want 400", n, err)
			}
			src2 := newSource(t, ctx, source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{Connections: conns, Batch: source.Batch{MaxEvents: 300}, LoadBalancing: source.LoadBalancing{Strategy: "greedy"}}})
			rec2 := newRecorder(400)
			r2 := run(t, ctx, src2, rec2.handle)
			waitFor(t, ctx, rec2.reached, r2, "400 new events", func() string { return fmt.Sprintf("%d received", rec2.count()) })
			for id, evs := range rec2.byPart {
				if first := evs[0].SequenceNumber; first != int64(len(rec.byPart[id])) {
					t.Errorf("partition %s resumed at seq %d, want %d", id, first, len(rec.byPart[id]))
				}
			}
			if err := r2.stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
		})
	}
}

// TestConnectionsValidated: a negative or too large number of connections
// is refused with the option's name.
func TestConnectionsValidated(t *testing.T) {
	for _, n := range []int{-1, source.MaxConnections + 1} {
		err := source.Options{Connection: "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=h", Store: fileStore(t), Settings: source.Settings{Connections: n}}.Validate()
		if err == nil || !strings.Contains(err.Error(), "connections:") {
			t.Errorf("Connections %d: %v, want an error naming connections", n, err)
		}
	}
}
