package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"sort"
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
	sender
	partitions []string
	perPart    int
	duration   time.Duration
	keys       int // keys per partition
	checkRows  bool
	seed       uint64

	mu     sync.Mutex // guards poison
	poison [3]int     // by kind, as sent
}

func (p *producer) run(ctx context.Context) error {
	return eachPartition(p.partitions, func(idx int, pid string) error {
		rnd := mrand.New(mrand.NewPCG(p.seed, uint64(idx)+1))
		versions := make([]int64, p.keys)
		return paced(ctx, p.perPart, p.duration, func(_ time.Time, next, n int) error {
			return p.sendBatch(ctx, rnd, versions, pid, next, n)
		})
	})
}

// eachPartition runs f for every partition at once and returns the first
// error.
func eachPartition(partitions []string, f func(idx int, pid string) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(partitions))
	for i, pid := range partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- f(i, pid)
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

// paced spreads perPart events evenly over d: batch sends the n events
// from index next on as they fall due (at most 300 at a time), start being
// when the sending began.
func paced(ctx context.Context, perPart int, d time.Duration, batch func(start time.Time, next, n int) error) error {
	start := time.Now()
	for next := 0; next < perPart; {
		due := min(perPart, int(float64(perPart)*time.Since(start).Seconds()/d.Seconds())+1)
		n := min(due-next, 300)
		if n <= 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if err := batch(start, next, n); err != nil {
			return err
		}
		next += n
	}
	return nil
}

func (p *producer) sendBatch(ctx context.Context, rnd *mrand.Rand, versions []int64, pid string, next, n int) error {
	evs := make([]*azeventhubs.EventData, 0, n)
	ids := make([]string, 0, n)
	var kinds [3]int
	for i := next; i < next+n; i++ {
		id := fmt.Sprintf("p%s-%07d", pid, i)
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
		evs = append(evs, &azeventhubs.EventData{Body: raw})
		ids = append(ids, id)
	}
	if err := p.send(ctx, pid, evs, ids); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range kinds {
		p.poison[i] += kinds[i]
	}
	return nil
}

// sender sends batches to one hub and keeps the ids of the events it
// acknowledged.
type sender struct {
	client *azeventhubs.ProducerClient

	sendMu  sync.Mutex // guards the fields below
	acked   map[string]bool
	sent    int
	sendErr int // failed sends, retried
	lastErr error
}

// send sends events (of the ids) to the partition as one batch, retrying
// until the hub accepts it or ctx ends.
func (s *sender) send(ctx context.Context, pid string, events []*azeventhubs.EventData, ids []string) error {
	for {
		err := s.trySend(ctx, pid, events)
		if err == nil {
			s.sendMu.Lock()
			defer s.sendMu.Unlock()
			if s.acked == nil {
				s.acked = map[string]bool{}
			}
			for _, id := range ids {
				s.acked[id] = true
			}
			s.sent += len(ids)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		s.sendMu.Lock()
		s.sendErr++
		s.lastErr = err
		s.sendMu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// lost returns, sorted, the acknowledged ids the hub read back lacks.
func (s *sender) lost(inHub map[string]int) []string {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	var out []string
	for id := range s.acked {
		if inHub[id] == 0 {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func (s *sender) trySend(ctx context.Context, pid string, events []*azeventhubs.EventData) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	batch, err := s.client.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
	if err != nil {
		return fmt.Errorf("new batch: %w", err)
	}
	for _, e := range events {
		if err := batch.AddEventData(e, nil); err != nil {
			return fmt.Errorf("add event: %w", err)
		}
	}
	if err := s.client.SendEventDataBatch(ctx, batch, nil); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}
