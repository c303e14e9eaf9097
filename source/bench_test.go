package source_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/produce"
	"github.com/ehsink/ehsink/source"
)

// BenchmarkReadBacklog reads a backlog of 4 × 5,000 events from earliest
// over 2 reader connections, each round once as the source does it and
// once with the processor's claim links given the configured prefetch (as
// before Source.claimPrefetch), taking turns. It reports, for each, the
// time from source.New to the last event and the spread of the
// partitions' starts (the first partition's first batch to the last
// one's), and the ratio of the read times (claim prefetch ÷ none).
func BenchmarkReadBacklog(b *testing.B) {
	const partitions, per = 4, 5000
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	srv, err := emulator.Start(ctx, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.WithoutCancel(ctx)) }()
	conn := srv.ConnectionString("orders")
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: partitions * per, Keys: 50, Seed: 7}); err != nil || n != partitions*per {
		b.Fatalf("Demo sent %d, %v", n, err)
	}
	_ = producer.Close(ctx)

	// read reads the whole backlog with a fresh checkpoint store.
	read := func(with func(source.Options) source.Options) (total, spread time.Duration) {
		store, err := checkpoint.NewFileStore(b.TempDir(), nil)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		src, err := source.New(ctx, with(source.Options{Connection: secretOf(conn), Store: store, Settings: source.Settings{
			Connections: 2, Prefetch: 2000, LoadBalancing: source.LoadBalancing{Strategy: "greedy"},
			// a partition's last, partial batch waits max_wait: short, so
			// that the read time is the reading's
			Batch: source.Batch{MaxWait: 50 * time.Millisecond}}}))
		if err != nil {
			b.Fatal(err)
		}
		var (
			mu    sync.Mutex
			got   int
			first = map[string]time.Time{}
			done  = make(chan struct{})
		)
		rctx, stop := context.WithCancel(ctx)
		ran := make(chan error, 1)
		go func() {
			ran <- src.Run(rctx, func(ctx context.Context, p *source.Partition) error {
				for {
					evs, err := p.Receive(ctx)
					if ctx.Err() != nil || err != nil {
						return err
					}
					if len(evs) == 0 {
						continue
					}
					mu.Lock()
					if _, ok := first[p.ID()]; !ok {
						first[p.ID()] = time.Now()
					}
					got += len(evs)
					if got == partitions*per {
						close(done)
					}
					mu.Unlock()
				}
			})
		}()
		select {
		case <-done:
		case err := <-ran:
			b.Fatalf("Run returned %v before the last event", err)
		case <-ctx.Done():
			b.Fatal("backlog not read within the bound")
		}
		total = time.Since(start)
		stop()
		if err := <-ran; err != nil {
			b.Fatal(err)
		}
		_ = src.Close(ctx)
		var lo, hi time.Time
		for _, t := range first {
			if lo.IsZero() || t.Before(lo) {
				lo = t
			}
			if t.After(hi) {
				hi = t
			}
		}
		return total, hi.Sub(lo)
	}
	none := func(o source.Options) source.Options { return o }
	var noneT, noneS, prefT, prefS time.Duration
	for i := 0; b.Loop(); i++ {
		// Each goes first every other round.
		for k := range 2 {
			if (i+k)%2 == 0 {
				t, s := read(none)
				noneT, noneS = noneT+t, noneS+s
			} else {
				t, s := read(source.WithClaimPrefetch)
				prefT, prefS = prefT+t, prefS+s
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(noneT.Milliseconds())/n, "ms/read")
	b.ReportMetric(float64(noneS.Milliseconds())/n, "ms-start-spread")
	b.ReportMetric(float64(prefT.Milliseconds())/n, "claim-prefetch-ms/read")
	b.ReportMetric(float64(prefS.Milliseconds())/n, "claim-prefetch-ms-start-spread")
	b.ReportMetric(prefT.Seconds()/noneT.Seconds(), "ratio")
}
