package produce

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// DemoOptions configures [Demo]. The zero value sends demo orders for 50
// customers as fast as the hub takes them until ctx is cancelled.
type DemoOptions struct {
	// Count stops after that many events. If zero, no limit.
	Count int
	// Rate is events per second. If zero, as fast as possible.
	Rate float64
	// Keys is the number of customers, each one partition key. If zero, 50.
	Keys int
	// Seed makes the generated content repeatable (order IDs stay unique
	// per run). If zero, a random seed.
	Seed uint64
	// MaxPendingBytes bounds the bytes of orders generated but not yet sent,
	// over all keys: when they hold more, the fullest key's batch is sent
	// early. It bounds the producer's memory whatever Count and Keys are.
	// If zero, DefaultMaxPendingBytes.
	MaxPendingBytes int
	// Logger receives a debug record per batch sent and an info record at
	// the end. If nil, logs are discarded.
	Logger *slog.Logger
	// OnSent, if set, is called with the number of events of each batch
	// the hub accepted (progress display).
	OnSent func(events int)
}

// Order is the demo event, sent as JSON (about 200 bytes).
type Order struct {
	// OrderID is unique across runs.
	OrderID string `json:"order_id"`
	// Customer placed the order; its ID is the event's partition key.
	Customer Customer `json:"customer"`
	// Amount is the sum of the items.
	Amount float64 `json:"amount"`
	// Currency is an ISO 4217 code.
	Currency string `json:"currency"`
	// Items are the order lines.
	Items []Item `json:"items"`
	// CreatedAt is when the producer made the order.
	CreatedAt time.Time `json:"created_at"`
	// Seq counts the orders of one customer in this run from 1, so a reader
	// can check per-key order.
	Seq int `json:"seq"`
}

// Customer is who placed an [Order].
type Customer struct {
	// ID is "c-NNN", also the partition key.
	ID string `json:"id"`
	// Name is a made-up name.
	Name string `json:"name"`
}

// Item is one line of an [Order].
type Item struct {
	// SKU identifies the product.
	SKU string `json:"sku"`
	// Qty is the number of units.
	Qty int `json:"qty"`
	// Price is the unit price.
	Price float64 `json:"price"`
}

var (
	firstNames = [...]string{"Ada", "Grace", "Alan", "Edsger", "Barbara", "Donald", "Margaret", "Ken", "Radia", "Linus", "Frances", "John"}
	lastNames  = [...]string{"Lovelace", "Hopper", "Turing", "Dijkstra", "Liskov", "Knuth", "Hamilton", "Thompson", "Perlman", "Torvalds", "Allen", "Backus"}
	currencies = [...]string{"EUR", "USD", "GBP", "CHF"}
)

// DemoCustomerID is the ID (and partition key) of customer i of [Demo].
func DemoCustomerID(i int) string { return fmt.Sprintf("c-%03d", i) }

// Demo sends demo orders keyed by customer ID, batched per key up to the
// hub's size limit, at opts.Rate. It returns the number of events the hub
// accepted. When ctx is cancelled it returns that number and nil; orders not
// yet sent are dropped. Orders are made one at a time as they are sent, so
// memory stays bounded by opts.MaxPendingBytes whatever opts.Count is.
func Demo(ctx context.Context, producer *azeventhubs.ProducerClient, opts DemoOptions) (int, error) {
	b := newBatcher(producer, opts.MaxPendingBytes)
	b.onSent = opts.OnSent
	return demo(ctx, b, opts)
}

// demo is Demo with its batcher given, so tests can see what it held.
func demo(ctx context.Context, b *batcher, opts DemoOptions) (int, error) {
	if opts.Keys <= 0 {
		opts.Keys = 50
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	seed := opts.Seed
	if seed == 0 {
		seed = mrand.Uint64()
	}
	rnd := mrand.New(mrand.NewPCG(seed, seed>>1|1))
	var run [4]byte
	_, _ = rand.Read(run[:])
	runID := hex.EncodeToString(run[:])
	names := make([]string, opts.Keys)
	for i := range names {
		names[i] = firstNames[rnd.IntN(len(firstNames))] + " " + lastNames[rnd.IntN(len(lastNames))]
	}
	perKey := make([]int, opts.Keys)

	start := time.Now()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for i := 0; opts.Count == 0 || i < opts.Count; i++ {
		if opts.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / opts.Rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				// nothing more to add now: send what is pending, then wait
				if err := b.Flush(ctx); err != nil {
					return done(ctx, b, log, err)
				}
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-ctx.Done():
					return done(ctx, b, log, nil)
				case <-timer.C:
				}
			}
		}
		if ctx.Err() != nil {
			return done(ctx, b, log, nil)
		}
		k := rnd.IntN(opts.Keys)
		perKey[k]++
		o := newOrder(rnd, fmt.Sprintf("o-%s-%07d", runID, i), Customer{ID: DemoCustomerID(k), Name: names[k]}, perKey[k])
		body, err := json.Marshal(o)
		if err != nil {
			return b.sent, fmt.Errorf("produce: demo order: %w", err)
		}
		ct := "application/json"
		if err := b.Add(ctx, Target{PartitionKey: o.Customer.ID}, &azeventhubs.EventData{Body: body, ContentType: &ct}); err != nil {
			return done(ctx, b, log, err)
		}
	}
	return done(ctx, b, log, b.Flush(ctx))
}

// done ends a producer run: a failure caused by cancellation is not one.
func done(ctx context.Context, b *batcher, log *slog.Logger, err error) (int, error) {
	if ctx.Err() != nil {
		err = nil
	}
	if err != nil {
		log.Warn("demo producer stopped", "sent", b.sent, "err", err)
	} else {
		log.Info("demo producer stopped", "sent", b.sent)
	}
	return b.sent, err
}

func newOrder(rnd *mrand.Rand, id string, c Customer, seq int) Order {
	o := Order{OrderID: id, Customer: c, Currency: currencies[rnd.IntN(len(currencies))], CreatedAt: time.Now().UTC().Truncate(time.Millisecond), Seq: seq}
	for n := 1 + rnd.IntN(2); n > 0; n-- {
		it := Item{SKU: fmt.Sprintf("SKU-%04d", rnd.IntN(10000)), Qty: 1 + rnd.IntN(5), Price: float64(100+rnd.IntN(9900)) / 100}
		o.Items = append(o.Items, it)
		o.Amount += float64(it.Qty) * it.Price
	}
	o.Amount = float64(int64(o.Amount*100+0.5)) / 100
	return o
}
