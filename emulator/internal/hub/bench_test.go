package hub

import (
	"context"
	"runtime"
	"testing"
)

// BenchmarkAppendNext appends 1,000,000 events of 200 bytes to one partition
// in batches of 100 and drains them with Next(300) (the SDK's default
// credit), either after appending (sequential) or while appending (tail).
// One op is the whole million; see the events/s and allocs/event metrics.
func BenchmarkAppendNext(b *testing.B) {
	const events, batch, credit = 1_000_000, 100, 300
	payload := make([]byte, 200)
	for i := range payload {
		payload[i] = byte(i)
	}
	msgs := make([][]byte, batch)
	for i := range msgs {
		msgs[i] = payload
	}
	for _, mode := range []string{"memory", "disk"} {
		for _, shape := range []string{"sequential", "tail"} {
			b.Run(mode+"/"+shape, func(b *testing.B) {
				b.ReportAllocs()
				var heapPerEvent float64
				for b.Loop() {
					cfg := Config{Fsync: FsyncNever, Hubs: []HubConfig{{Name: "bench", Partitions: 1}}}
					if mode == "disk" {
						cfg.DataDir = b.TempDir()
					}
					n, err := Open(cfg)
					if err != nil {
						b.Fatal(err)
					}
					h, _ := n.Hub("bench")
					r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "bench", Start: Earliest()})
					if err != nil {
						b.Fatal(err)
					}
					produce := func() {
						for i := 0; i < events/batch; i++ {
							if _, err := h.Append("0", nil, msgs); err != nil {
								b.Error(err)
								return
							}
						}
					}
					done := make(chan struct{})
					if shape == "tail" {
						go func() { defer close(done); produce() }()
					} else {
						var before runtime.MemStats
						if mode == "memory" {
							b.StopTimer()
							runtime.GC()
							runtime.ReadMemStats(&before)
							b.StartTimer()
						}
						produce()
						if mode == "memory" {
							b.StopTimer()
							var after runtime.MemStats
							runtime.GC()
							runtime.ReadMemStats(&after)
							heapPerEvent = float64(after.HeapAlloc-before.HeapAlloc) / events
							b.StartTimer()
						}
						close(done)
					}
					ctx := context.Background()
					for got := 0; got < events; {
						evs, err := r.Next(ctx, credit)
						if err != nil {
							b.Fatal(err)
						}
						got += len(evs)
					}
					<-done
					if err := n.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
				b.ReportMetric(0, "ns/op")
				if heapPerEvent > 0 {
					b.ReportMetric(heapPerEvent, "heapB/event")
				}
			})
		}
	}
}
