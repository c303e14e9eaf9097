package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// The producer's events. A valid body is
// {"id":"p3-0000042","k":"p3-k017","v":12,"amount":12.34}: ids are unique,
// every version of key k goes to one partition, versions grow. Poison:
//
//   - bodies the mapping rejects (not JSON, or a version that is not a
//     number): every connector dead-letters them;
//   - rows PostgreSQL rejects (amount < 0 violates the tables' CHECK): the
//     PostgreSQL connectors dead-letter them, Parquet stores them.
type body struct {
	ID     string  `json:"id"`
	Key    string  `json:"k"`
	Ver    int64   `json:"v"`
	Amount float64 `json:"amount"`
}

// kind of an event as the checks see it, decided from the body read back
// from the hub, not from what the producer meant to send.
type kind int

const (
	valid     kind = iota
	mapPoison      // the mapping rejects it
	rowPoison      // PostgreSQL rejects it
)

func classify(b []byte) (kind, body) {
	var v body
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" || v.Key == "" {
		return mapPoison, v
	}
	if v.Amount < 0 {
		return rowPoison, v
	}
	return valid, v
}

// producer sends k.events over k.duration, one goroutine per partition (so
// the versions of a key are in order), retrying a failed send with the
// same events: a send whose answer was lost may land twice, with two
// sequence numbers, which the checks treat as two events.
type producer struct {
	client     *azeventhubs.ProducerClient
	partitions []string
	perPart    int
	duration   time.Duration
	keys       int // keys per partition
	checkRows  bool
	seed       uint64

	mu      sync.Mutex // guards the counters below
	acked   map[string]bool
	sendErr int
	lastErr error
	sent    int
	poison  [3]int // by kind, as sent
}

func (p *producer) run(ctx context.Context) error {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(p.partitions))
	for i, pid := range p.partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- p.runPartition(ctx, start, i, pid)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func (p *producer) runPartition(ctx context.Context, start time.Time, idx int, pid string) error {
	rnd := mrand.New(mrand.NewPCG(p.seed, uint64(idx)+1))
	versions := make([]int64, p.keys)
	next := 0
	for next < p.perPart {
		elapsed := time.Since(start)
		due := min(p.perPart, int(float64(p.perPart)*elapsed.Seconds()/p.duration.Seconds())+1)
		n := min(due-next, 300)
		if n <= 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		bodies := make([][]byte, 0, n)
		ids := make([]string, 0, n)
		var kinds [3]int
		for range n {
			id := fmt.Sprintf("p%s-%07d", pid, next)
			next++
			ki := rnd.IntN(p.keys)
			versions[ki]++
			b := body{ID: id, Key: fmt.Sprintf("p%s-k%03d", pid, ki), Ver: versions[ki], Amount: float64(rnd.IntN(100000)) / 100}
			var raw []byte
			switch r := rnd.IntN(1000); {
			case r == 0:
				raw = []byte("not json: " + id)
				kinds[mapPoison]++
			case r == 1:
				raw = fmt.Appendf(nil, `{"id":%q,"k":%q,"v":"seven","amount":1}`, id, b.Key)
				kinds[mapPoison]++
			case r == 2 && p.checkRows:
				b.Amount = -float64(1+rnd.IntN(100)) / 4
				raw, _ = json.Marshal(b)
				kinds[rowPoison]++
			default:
				raw, _ = json.Marshal(b)
				kinds[valid]++
			}
			bodies = append(bodies, raw)
			ids = append(ids, id)
		}
		if err := p.send(ctx, pid, bodies); err != nil {
			return err
		}
		p.mu.Lock()
		for _, id := range ids {
			p.acked[id] = true
		}
		p.sent += n
		for i := range kinds {
			p.poison[i] += kinds[i]
		}
		p.mu.Unlock()
	}
	return nil
}

// send sends bodies to the partition as one batch, retrying until the hub
// accepts it or ctx ends.
func (p *producer) send(ctx context.Context, pid string, bodies [][]byte) error {
	for {
		err := p.trySend(ctx, pid, bodies)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.mu.Lock()
		p.sendErr++
		p.lastErr = err
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (p *producer) trySend(ctx context.Context, pid string, bodies [][]byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	batch, err := p.client.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
	if err != nil {
		return fmt.Errorf("new batch: %w", err)
	}
	for _, b := range bodies {
		if err := batch.AddEventData(&azeventhubs.EventData{Body: b}, nil); err != nil {
			return fmt.Errorf("add event: %w", err)
		}
	}
	if err := p.client.SendEventDataBatch(ctx, batch, nil); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}
