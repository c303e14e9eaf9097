package emulator

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	goamqp "github.com/Azure/go-amqp"
)

// BenchmarkSDKSend measures SDK producer throughput: batches of 1 KiB
// events sent round-robin to 4 partitions. Reports events/s.
func BenchmarkSDKSend(b *testing.B) {
	srv := startEmulator(b, Config{Hubs: []HubConfig{{Name: "orders", Partitions: 4}}})
	ctx := context.Background()
	p, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)
	body := make([]byte, 1024)
	b.SetBytes(1024)
	b.ResetTimer()
	sent := 0
	for part := 0; sent < b.N; part = (part + 1) % 4 {
		batch, err := p.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: ptr(fmt.Sprint(part))})
		if err != nil {
			b.Fatal(err)
		}
		for sent < b.N {
			if err := batch.AddEventData(&azeventhubs.EventData{Body: body}, nil); err != nil {
				break // batch full
			}
			sent++
		}
		if err := p.SendEventDataBatch(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSDKDrain measures SDK consumer throughput: b.N events of about
// 200 bytes, pre-stored across 4 partitions, drained from earliest by one
// PartitionClient per partition on one ConsumerClient. Reports events/s.
func BenchmarkSDKDrain(b *testing.B) {
	srv := startEmulator(b, Config{Hubs: []HubConfig{{Name: "orders", Partitions: 4}}})
	ctx := context.Background()
	msg, err := (&goamqp.Message{Data: [][]byte{make([]byte, 200)}}).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	h, err := srv.ns.Hub("orders")
	if err != nil {
		b.Fatal(err)
	}
	per := (b.N + 3) / 4
	for part := 0; part < 4; part++ {
		for left := per; left > 0; {
			n := min(left, 1000)
			msgs := make([][]byte, n)
			for i := range msgs {
				msgs[i] = msg
			}
			if _, err := h.Append(fmt.Sprint(part), nil, msgs); err != nil {
				b.Fatal(err)
			}
			left -= n
		}
	}
	c, err := azeventhubs.NewConsumerClientFromConnectionString(srv.ConnectionString("orders"), "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	b.SetBytes(200)
	b.ResetTimer()
	var wg sync.WaitGroup
	for part := 0; part < 4; part++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pc, err := c.NewPartitionClient(fmt.Sprint(part), &azeventhubs.PartitionClientOptions{
				StartPosition: azeventhubs.StartPosition{Earliest: ptr(true)},
				Prefetch:      3000,
			})
			if err != nil {
				b.Error(err)
				return
			}
			defer pc.Close(ctx)
			for got := 0; got < per; {
				evs, err := pc.ReceiveEvents(ctx, min(1000, per-got), nil)
				if err != nil {
					b.Error(err)
					return
				}
				got += len(evs)
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(4*per)/b.Elapsed().Seconds(), "events/s")
}
