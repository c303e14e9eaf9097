package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/go-amqp"
)

// scriptedReceiver answers ReceiveEvents calls in turn from a script and
// records the count and deadline of each call. Its answers follow the
// SDK's contract: the events (with a nil error) or an error.
type scriptedReceiver struct {
	answers   []answer
	counts    []int
	deadlines []time.Time
}

type answer struct {
	events int   // how many events, numbered on from the last answer's
	err    error // when events is 0
	// wait: nothing comes; the call returns err, or else the context's
	// error, when the context ends, as the SDK's does
	wait bool
}

func (r *scriptedReceiver) ReceiveEvents(ctx context.Context, count int, _ *azeventhubs.ReceiveEventsOptions) ([]*azeventhubs.ReceivedEventData, error) {
	dl, _ := ctx.Deadline()
	r.counts, r.deadlines = append(r.counts, count), append(r.deadlines, dl)
	if len(r.answers) == 0 {
		return nil, fmt.Errorf("scripted receiver: call %d with count %d not in the script", len(r.counts), count)
	}
	a := r.answers[0]
	r.answers = r.answers[1:]
	if a.wait {
		<-ctx.Done()
		if a.err != nil {
			return nil, a.err
		}
		return nil, ctx.Err()
	}
	if a.events > count {
		return nil, fmt.Errorf("scripted receiver: asked for %d, the script answers %d", count, a.events)
	}
	var out []*azeventhubs.ReceivedEventData
	for range a.events {
		out = append(out, &azeventhubs.ReceivedEventData{SequenceNumber: int64(len(r.counts)*1000 + len(out))})
	}
	if a.events == 0 {
		return nil, a.err
	}
	return out, nil
}

// noOwners is a checkpoint store that lists no ownership (Partition.markLost reads it).
type noOwners struct{ azeventhubs.CheckpointStore }

func (noOwners) ListOwnership(context.Context, string, string, string, *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return nil, nil
}

// TestReceiveAsksForMinEventsThenWhatIsThere: how one Receive uses the
// SDK's ReceiveEvents, which returns at its count or at its deadline. The
// first call asks for min_events (1 by default) bounded by max_wait; once
// it has them, a second call asks for the rest of a batch, bounded by a
// linger that ends before max_wait does (or min_wait, when longer), or,
// when the partition is known to hold more (a backlog), for what it holds
// up to a batch, bounded by max_wait.
func TestReceiveAsksForMinEventsThenWhatIsThere(t *testing.T) {
	lost := &amqp.Error{Condition: amqp.ErrCondStolen, Description: "a new receiver"}
	// what net.Dialer returns when the context's deadline passes first
	dialTimeout := &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}
	tests := []struct {
		name      string
		batch     Batch
		answers   []answer
		counts    []int // the counts asked, call by call
		events    int   // handed over
		err       error // matched with errors.Is
		longerGap bool  // the second call's deadline is past the linger's (min_wait)
		// held: the partition's last enqueued sequence number by its last
		// properties read is this far past the first call's last event
		// (the scripted events of the first call end at 1000+n-1)
		held int64
	}{
		{name: "default: one event, then what is there",
			answers: []answer{{events: 1}, {events: 40}}, counts: []int{1, 1999}, events: 41},
		{name: "default: one event, nothing more",
			answers: []answer{{events: 1}, {wait: true}}, counts: []int{1, 1999}, events: 1},
		{name: "default: nothing within max_wait",
			batch:   Batch{MaxWait: 20 * time.Millisecond},
			answers: []answer{{wait: true}}, counts: []int{1}, events: 0},
		{name: "a full batch",
			answers: []answer{{events: 1}, {events: 1999}}, counts: []int{1, 1999}, events: 2000},
		{name: "min_events 100, reached",
			batch:   Batch{MinEvents: 100},
			answers: []answer{{events: 100}, {events: 7}}, counts: []int{100, 1900}, events: 107},
		{name: "min_events 100, max_wait passed first",
			batch:   Batch{MinEvents: 100},
			answers: []answer{{events: 60}}, counts: []int{100}, events: 60},
		{name: "min_events equal to max_events: one call, as before min_events",
			batch:   Batch{MinEvents: 500, MaxEvents: 500},
			answers: []answer{{events: 500}}, counts: []int{500}, events: 500},
		{name: "min_wait gathers for longer",
			batch:   Batch{MinWait: 250 * time.Millisecond},
			answers: []answer{{events: 1}, {events: 3}}, counts: []int{1, 1999}, events: 4, longerGap: true},
		{name: "a backlog: the second call waits for the events the partition holds, up to max_wait",
			answers: []answer{{events: 1}, {events: 1999}}, counts: []int{1, 1999}, events: 2000, held: 5000},
		{name: "the end of a backlog: the second call waits for what the partition holds, no more",
			answers: []answer{{events: 1}, {events: 700}}, counts: []int{1, 700}, events: 701, held: 700},
		{name: "ownership lost while gathering: the batch is dropped",
			answers: []answer{{events: 1}, {err: lost}}, counts: []int{1, 1999}, err: ErrOwnershipLost},
		{name: "another failure while gathering: what came is handed over",
			answers: []answer{{events: 1}, {err: errors.New("link detached")}}, counts: []int{1, 1999}, events: 1},
		{name: "a dial cut short by max_wait: no events, no failure",
			batch:   Batch{MaxWait: 20 * time.Millisecond},
			answers: []answer{{wait: true, err: dialTimeout}}, counts: []int{1}, events: 0},
		{name: "a connection lost: a failure the source reopens the partition for",
			answers: []answer{{err: &amqp.ConnError{}}}, counts: []int{1}, err: errReceiveFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			batch := tt.batch
			if batch.MaxWait == 0 {
				batch.MaxWait = 30 * time.Second
			}
			opts := Options{Settings: Settings{Batch: batch}, Store: noOwners{}}.WithDefaults()
			s := &Source{opts: opts, log: slog.New(slog.DiscardHandler), hub: "hub"}
			if tt.held > 0 {
				s.last = map[string]int64{"0": 1000 + int64(tt.answers[0].events) - 1 + tt.held}
			}
			r := &scriptedReceiver{answers: tt.answers}
			p := &Partition{s: s, id: "0", recv: r}
			start := time.Now()
			got, err := p.Receive(t.Context())
			end := time.Now()
			if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Fatalf("Receive: %v, want %v", err, tt.err)
			}
			if len(got) != tt.events {
				t.Errorf("Receive handed over %d events, want %d", len(got), tt.events)
			}
			if !slices.Equal(r.counts, tt.counts) {
				t.Errorf("ReceiveEvents counts %v, want %v", r.counts, tt.counts)
			}
			if len(r.deadlines) < 2 {
				return
			}
			// The first call is bounded by max_wait; the second ends
			// before it, after the linger, or after min_wait when set, or
			// with it when the partition holds more.
			first, second := r.deadlines[0], r.deadlines[1]
			if first.Before(start.Add(batch.MaxWait)) {
				t.Errorf("first deadline %v after the start, want max_wait (%v)", first.Sub(start), batch.MaxWait)
			}
			if tt.held > 0 {
				if !second.Equal(first) {
					t.Errorf("the partition holds %d more: second deadline %v after the start, want max_wait's (%v)", tt.held, second.Sub(start), first.Sub(start))
				}
				return
			}
			if !second.Before(first) {
				t.Errorf("deadlines %v then %v after the start: want the second before max_wait's", first.Sub(start), second.Sub(start))
			}
			// The linger is counted from the gathering call (before end);
			// min_wait from the first call's return (after start).
			if tt.longerGap {
				if second.Before(start.Add(batch.MinWait)) {
					t.Errorf("the gathering call's deadline %v after the start, want min_wait (%v) or more", second.Sub(start), batch.MinWait)
				}
			} else if second.After(end.Add(handOverLinger)) {
				t.Errorf("the gathering call's deadline %v after the start, past the linger (%v) after Receive returned (%v)", second.Sub(start), handOverLinger, end.Sub(start))
			}
		})
	}
}
