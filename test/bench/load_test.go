//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/produce"
)

// partitions is the partition count of the benchmark hubs.
const partitions = 4

// base is the created_at of the first order; orders are 1 ms apart.
var base = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

var currencies = [...]string{"EUR", "USD", "GBP", "CHF"}

// order returns order i of partition p: the demo producer's shape, made
// from (p, i) alone so that the raw baselines can make the same rows again
// without keeping them.
func order(p, i int) produce.Order {
	rnd := rand.New(rand.NewPCG(uint64(p), uint64(i)))
	c := rnd.IntN(50)
	o := produce.Order{
		OrderID:   fmt.Sprintf("o-%d-%09d", p, i),
		Customer:  produce.Customer{ID: produce.DemoCustomerID(c), Name: "Customer " + strconv.Itoa(c)},
		Currency:  currencies[rnd.IntN(len(currencies))],
		CreatedAt: base.Add(time.Duration(i) * time.Millisecond),
		Seq:       i + 1,
	}
	for n := 1 + rnd.IntN(2); n > 0; n-- {
		it := produce.Item{SKU: fmt.Sprintf("SKU-%04d", rnd.IntN(10000)), Qty: 1 + rnd.IntN(5), Price: float64(100+rnd.IntN(9900)) / 100}
		o.Items = append(o.Items, it)
		o.Amount += float64(it.Qty) * it.Price
	}
	o.Amount = float64(int64(o.Amount*100+0.5)) / 100
	return o
}

// row is order i of partition p as the sinks store it: the columns of
// columnsYAML, in order. Sequence numbers start at 0 in an empty hub.
func row(p, i int, enqueued time.Time) []any {
	o := order(p, i)
	return []any{o.OrderID, o.Customer.ID, o.Amount, o.Currency, o.CreatedAt, strconv.Itoa(p), int64(i), enqueued}
}

// columnsYAML maps the orders to the columns of row, for both sinks.
const columnsYAML = `
        - {name: order_id,    from: $.order_id,         type: string, nullable: false}
        - {name: customer,    from: $.customer.id,      type: string}
        - {name: amount,      from: $.amount,           type: double}
        - {name: currency,    from: $.currency,         type: string}
        - {name: created_at,  from: $.created_at,       type: timestamp}
        - {name: partition,   from: "@partition",       type: string}
        - {name: seq,         from: "@sequence_number", type: int64}
        - {name: enqueued_at, from: "@enqueued_time",   type: timestamp}`

// rowColumns and rowDDL are the same columns for the raw baselines.
var rowColumns = []string{"order_id", "customer", "amount", "currency", "created_at", "partition", "seq", "enqueued_at"}

const rowDDL = `order_id text NOT NULL, customer text, amount double precision, currency text,
	created_at timestamptz, partition text, seq bigint, enqueued_at timestamptz`

// loadBacklog sends perPartition orders to each partition of the hub, one
// goroutine per partition on one producer, in full batches. It returns
// the bytes of the bodies sent.
func loadBacklog(b *testing.B, conn string, perPartition int) int64 {
	b.Helper()
	ctx := context.Background()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close(ctx)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		errs  []error
		total int64
	)
	for p := range partitions {
		wg.Go(func() {
			n, err := sendPartition(ctx, producer, p, perPartition)
			mu.Lock()
			defer mu.Unlock()
			total += n
			errs = append(errs, err)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
	return total
}

func sendPartition(ctx context.Context, producer *azeventhubs.ProducerClient, p, n int) (int64, error) {
	id := strconv.Itoa(p)
	ct := "application/json"
	var (
		batch *azeventhubs.EventDataBatch
		bytes int64
	)
	send := func() error {
		if batch == nil || batch.NumEvents() == 0 {
			return nil
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("partition %s: send: %w", id, err)
		}
		batch = nil
		return nil
	}
	for i := 0; i < n; {
		if batch == nil {
			var err error
			if batch, err = producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id}); err != nil {
				return bytes, fmt.Errorf("partition %s: new batch: %w", id, err)
			}
		}
		body, err := json.Marshal(order(p, i))
		if err != nil {
			return bytes, err
		}
		err = batch.AddEventData(&azeventhubs.EventData{Body: body, ContentType: &ct}, nil)
		switch {
		case errors.Is(err, azeventhubs.ErrEventDataTooLarge):
			if err := send(); err != nil {
				return bytes, err
			}
			continue
		case err != nil:
			return bytes, fmt.Errorf("partition %s: add: %w", id, err)
		}
		bytes += int64(len(body))
		i++
	}
	return bytes, send()
}

// lastSequences returns the last sequence number of every partition.
func lastSequences(b *testing.B, conn string) map[string]int64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	cc, err := azeventhubs.NewConsumerClientFromConnectionString(conn, "", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close(ctx)
	last := map[string]int64{}
	for p := range partitions {
		id := strconv.Itoa(p)
		pp, err := cc.GetPartitionProperties(ctx, id, nil)
		if err != nil {
			b.Fatal(err)
		}
		last[id] = pp.LastEnqueuedSequenceNumber
	}
	return last
}
