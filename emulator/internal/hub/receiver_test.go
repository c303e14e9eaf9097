package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEpochRules(t *testing.T) {
	type open struct {
		name  string
		cg    string // "" = $Default
		part  string // "" = "0"
		epoch *int64
		// want: "" = accepted, else the refusal's condition
		wantCond string
		wantDesc string // exact description when set
		// detached: receivers (by name) that this open detaches, with the condition
		detached map[string]string
		detDesc  map[string]string // exact OnDetach description when set
	}
	tests := []struct {
		name  string
		opens []open
	}{
		{"higher epoch steals", []open{
			{name: "a", epoch: ptr[int64](1)},
			{name: "b", epoch: ptr[int64](2), detached: map[string]string{"a": CondStolen},
				detDesc: map[string]string{"a": "New receiver 'b' with higher epoch of '2' is created hence current receiver 'a' with epoch '1' is getting disconnected. If you are recreating the receiver, make sure a higher epoch is used."}},
		}},
		{"equal epoch steals, last wins", []open{
			{name: "a", epoch: ptr[int64](0)},
			{name: "b", epoch: ptr[int64](0), detached: map[string]string{"a": CondStolen}},
			{name: "c", epoch: ptr[int64](0), detached: map[string]string{"b": CondStolen}},
		}},
		{"lower epoch refused", []open{
			{name: "a", epoch: ptr[int64](5)},
			{name: "b", epoch: ptr[int64](4), wantCond: CondStolen,
				wantDesc: "Receiver 'a' with a higher epoch '5' already exists. Receiver 'b' with epoch 4 cannot be created. Make sure you are creating receiver with increasing epoch value to ensure connectivity, or ensure all old epoch receivers are closed or disconnected"},
		}},
		{"non-epoch refused while epoch holds", []open{
			{name: "a", epoch: ptr[int64](3)},
			{name: "b", wantCond: CondStolen,
				wantDesc: "At least one receiver for the endpoint is created with epoch of '3', and so non-epoch receiver is not allowed. Either reconnect with a higher epoch, or make sure all epoch receivers are closed or disconnected."},
		}},
		{"epoch steals every non-epoch receiver", []open{
			{name: "a"}, {name: "b"}, {name: "c"},
			{name: "d", epoch: ptr[int64](0), detached: map[string]string{"a": CondStolen, "b": CondStolen, "c": CondStolen}},
			{name: "e", wantCond: CondStolen},
		}},
		{"five non-epoch readers, sixth refused", []open{
			{name: "a"}, {name: "b"}, {name: "c"}, {name: "d"}, {name: "e"},
			{name: "f", wantCond: CondResourceLimitExceeded,
				wantDesc: "Exceeded the maximum number of allowed receivers per partition in a consumer group which is 5. List of connected receivers - a, b, c, d, e."},
			{name: "g", cg: "cg1"}, // another consumer group has its own quota
			{name: "h", part: "1"}, // and so has another partition
		}},
		{"scoped to consumer group and partition", []open{
			{name: "a", epoch: ptr[int64](9)},
			{name: "b", cg: "cg1", epoch: ptr[int64](1)},
			{name: "c", part: "1", epoch: ptr[int64](1)},
			{name: "d", cg: "cg1", wantCond: CondStolen},
			{name: "e", cg: "cg1", part: "3"},
			{name: "f", part: "2"},
		}},
		{"undeclared consumer group", []open{
			{name: "a", cg: "nope", wantCond: CondNotFound},
		}},
		{"unknown partition", []open{
			{name: "a", part: "4", wantCond: CondArgumentOutOfRange},
			{name: "b", part: "-1", wantCond: CondArgumentOutOfRange},
			{name: "c", part: "01", wantCond: CondArgumentOutOfRange},
			{name: "d", part: "x", wantCond: CondArgumentOutOfRange},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := openNS(t, Config{})
			h := mustHub(t, n, "orders")
			var mu sync.Mutex
			got := map[string]*Error{} // OnDetach calls by receiver name
			recv := map[string]*Receiver{}
			for _, o := range tt.opens {
				part := o.part
				if part == "" {
					part = "0"
				}
				name := o.name
				r, err := h.OpenReceiver(ReceiverOptions{ConsumerGroup: o.cg, Partition: part, Name: name, Epoch: o.epoch,
					OnDetach: func(e *Error) {
						mu.Lock()
						defer mu.Unlock()
						if got[name] != nil {
							t.Errorf("OnDetach of %s called twice", name)
						}
						got[name] = e
					}})
				if o.wantCond != "" {
					var he *Error
					if !errors.As(err, &he) || he.Condition != o.wantCond {
						t.Fatalf("open %s: %v, want condition %s", name, err, o.wantCond)
					}
					if o.wantDesc != "" && he.Description != o.wantDesc {
						t.Fatalf("open %s: description\n%q, want\n%q", name, he.Description, o.wantDesc)
					}
					continue
				}
				if err != nil {
					t.Fatalf("open %s: %v", name, err)
				}
				recv[name] = r
				mu.Lock()
				for old, cond := range o.detached {
					e := got[old]
					if e == nil || e.Condition != cond {
						t.Fatalf("after opening %s: %s detached with %v, want %s", name, old, e, cond)
					}
					if want := o.detDesc[old]; want != "" && e.Description != want {
						t.Fatalf("detach description of %s\n%q, want\n%q", old, e.Description, want)
					}
					// The detached receiver's Next returns the same error.
					if _, err := recv[old].Next(context.Background(), 1); !errors.Is(err, e) {
						t.Fatalf("Next of detached %s = %v, want %v", old, err, e)
					}
				}
				for other, e := range got {
					if _, ok := o.detached[other]; !ok && recv[other] != nil && recv[other].Err() == nil {
						t.Fatalf("%s detached unexpectedly: %v", other, e)
					}
				}
				mu.Unlock()
			}
			// Every still-open receiver is unaffected.
			for name, r := range recv {
				mu.Lock()
				_, det := got[name]
				mu.Unlock()
				if !det && r.Err() != nil {
					t.Fatalf("%s: Err = %v", name, r.Err())
				}
			}
		})
	}
}

func TestOwnershipReleasedByClose(t *testing.T) {
	n := openNS(t, Config{})
	h := mustHub(t, n, "orders")
	a, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "a", Epoch: ptr[int64](7)})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	a.Close() // idempotent
	// A non-epoch and a lower-epoch receiver are now accepted.
	b, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "b"})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "c", Epoch: ptr[int64](1)}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2*MaxNonEpochReceivers; i++ { // closing frees quota
		r, err := h.OpenReceiver(ReceiverOptions{Partition: "1", Name: strconv.Itoa(i)})
		if err != nil {
			t.Fatalf("receiver %d: %v", i, err)
		}
		r.Close()
	}
	if _, err := a.Next(context.Background(), 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

func TestStartPositions(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			clk := newClock()
			cfg := Config{Now: clk.Now, SegmentBytes: 700} // several segments
			if mode == "disk" {
				cfg.DataDir = t.TempDir()
			}
			n := openNS(t, cfg)
			h := mustHub(t, n, "orders")
			const total = 60
			for i := 0; i < total; i++ {
				if _, err := h.Append("2", nil, [][]byte{msg(i)}); err != nil {
					t.Fatal(err)
				}
				if i%2 == 1 { // two events per millisecond
					clk.Advance(time.Millisecond)
				}
			}
			all := readAll(t, h, "2")
			off := func(i int) int64 { v, _ := strconv.ParseInt(all[i].Offset, 10, 64); return v }
			ms := func(i int) int64 { return all[i].EnqueuedTime.UnixMilli() }
			tests := []struct {
				expr  string
				first int64 // first sequence number delivered; total = none yet (tail)
			}{
				{"amqp.annotation.x-opt-offset > '-1'", 0},
				{"amqp.annotation.x-opt-offset >= '-1'", 0},
				{"amqp.annotation.x-opt-offset > '@latest'", total},
				{"amqp.annotation.x-opt-offset >= '@latest'", total},
				{fmt.Sprintf("amqp.annotation.x-opt-offset > '%d'", off(10)), 11},
				{fmt.Sprintf("amqp.annotation.x-opt-offset >= '%d'", off(10)), 10},
				{fmt.Sprintf("amqp.annotation.x-opt-offset >= '%d'", off(10)+1), 11}, // not a record start
				{fmt.Sprintf("amqp.annotation.x-opt-offset > '%d'", off(10)+1), 11},
				{fmt.Sprintf("amqp.annotation.x-opt-offset > '%d'", off(total-1)), total},
				{"amqp.annotation.x-opt-offset > '999999999'", total},
				{"amqp.annotation.x-opt-offset >= '0'", 0},
				{"amqp.annotation.x-opt-sequence-number > '-1'", 0},
				{"amqp.annotation.x-opt-sequence-number >= '-1'", 0},
				{"amqp.annotation.x-opt-sequence-number > '0'", 1},
				{"amqp.annotation.x-opt-sequence-number >= '37'", 37},
				{"amqp.annotation.x-opt-sequence-number > '37'", 38},
				{fmt.Sprintf("amqp.annotation.x-opt-sequence-number > '%d'", total-1), total},
				{"amqp.annotation.x-opt-sequence-number >= '100000'", total},
				{fmt.Sprintf("amqp.annotation.x-opt-enqueued-time >= '%d'", ms(20)), 20},
				{fmt.Sprintf("amqp.annotation.x-opt-enqueued-time > '%d'", ms(20)), 22},
				{fmt.Sprintf("amqp.annotation.x-opt-enqueued-time > '%d'", ms(21)), 22},
				{"amqp.annotation.x-opt-enqueued-time > '0'", 0},
				{fmt.Sprintf("amqp.annotation.x-opt-enqueued-time > '%d'", ms(total-1)), total},
			}
			for i, tt := range tests {
				t.Run(tt.expr, func(t *testing.T) {
					sp, err := ParseSelector(tt.expr)
					if err != nil {
						t.Fatal(err)
					}
					r, err := h.OpenReceiver(ReceiverOptions{Partition: "2", Name: "r" + strconv.Itoa(i), Start: sp})
					if err != nil {
						t.Fatal(err)
					}
					defer r.Close()
					if tt.first == total {
						assertNoEvent(t, r)
						return
					}
					evs := drain(t, r, int(total-tt.first))
					for j, e := range evs {
						w := all[tt.first+int64(j)]
						if e.SequenceNumber != w.SequenceNumber || e.Offset != w.Offset || !e.EnqueuedTime.Equal(w.EnqueuedTime) || !bytes.Equal(e.Message, w.Message) {
							t.Fatalf("event %d = %+v, want %+v", j, e, w)
						}
					}
					assertNoEvent(t, r)
				})
			}
			// A tailing receiver (latest, or positioned beyond the end) gets
			// exactly the events appended after it opened.
			for i, expr := range []string{"amqp.annotation.x-opt-offset > '@latest'", "amqp.annotation.x-opt-sequence-number > '5000'"} {
				sp, _ := ParseSelector(expr)
				r, err := h.OpenReceiver(ReceiverOptions{Partition: "2", Name: "tail" + strconv.Itoa(i), Start: sp})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.Append("2", nil, [][]byte{[]byte("new")}); err != nil {
					t.Fatal(err)
				}
				evs := drain(t, r, 1)
				if evs[0].SequenceNumber != int64(total+i) || string(evs[0].Message) != "new" {
					t.Fatalf("%s: tail got %+v", expr, evs[0])
				}
				r.Close()
			}
		})
	}
}

func TestNextWakesOnAppend(t *testing.T) {
	n := openNS(t, Config{})
	h := mustHub(t, n, "orders")
	r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []Event)
	go func() {
		evs, err := r.Next(context.Background(), 10)
		if err != nil {
			t.Error(err)
		}
		got <- evs
	}()
	if _, err := h.Append("0", ptr("key"), [][]byte{[]byte("x"), []byte("y")}); err != nil {
		t.Fatal(err)
	}
	evs := <-got
	if len(evs) == 0 || string(evs[0].Message) != "x" || evs[0].PartitionKey == nil || *evs[0].PartitionKey != "key" {
		t.Fatalf("got %+v", evs)
	}
}

func TestNextUnblocksOnCloseDetachAndShutdown(t *testing.T) {
	cases := []struct {
		name string
		do   func(n *Namespace, r *Receiver)
		want func(error) bool
	}{
		{"Close", func(_ *Namespace, r *Receiver) { r.Close() }, func(err error) bool { return errors.Is(err, ErrClosed) }},
		{"ForceDetach", func(n *Namespace, _ *Receiver) {
			if got := n.ForceDetach("orders", "3"); got != 1 {
				panic(fmt.Sprintf("ForceDetach = %d", got))
			}
		}, func(err error) bool { return ConditionOf(err) == CondDetachForced }},
		{"Namespace.Close", func(n *Namespace, _ *Receiver) { _ = n.Close() }, func(err error) bool { return errors.Is(err, ErrClosed) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := openNS(t, Config{})
			h := mustHub(t, n, "orders")
			var detached []*Error
			r, err := h.OpenReceiver(ReceiverOptions{Partition: "3", Name: "r", ConsumerGroup: "cg1",
				OnDetach: func(e *Error) { detached = append(detached, e) }})
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error)
			go func() {
				_, err := r.Next(context.Background(), 1)
				done <- err
			}()
			c.do(n, r)
			if err := <-done; !c.want(err) {
				t.Fatalf("Next = %v", err)
			}
			if c.name == "ForceDetach" {
				if len(detached) != 1 || detached[0].Condition != CondDetachForced || !strings.Contains(detached[0].Description, "orders/Partitions/3") {
					t.Fatalf("OnDetach calls: %v", detached)
				}
			} else if len(detached) != 0 {
				t.Fatalf("OnDetach called for %s: %v", c.name, detached)
			}
		})
	}
}

func TestForceDetachCounts(t *testing.T) {
	n := openNS(t, Config{})
	h := mustHub(t, n, "orders")
	for i, cg := range []string{"$Default", "$Default", "cg1"} {
		if _, err := h.OpenReceiver(ReceiverOptions{Partition: "1", ConsumerGroup: cg, Name: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.OpenReceiver(ReceiverOptions{Partition: "2", Name: "other"}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		hub, part string
		want      int
	}{{"orders", "1", 3}, {"orders", "1", 0}, {"orders", "2", 1}, {"nope", "1", 0}, {"orders", "9", 0}} {
		if got := n.ForceDetach(tt.hub, tt.part); got != tt.want {
			t.Fatalf("ForceDetach(%s, %s) = %d, want %d", tt.hub, tt.part, got, tt.want)
		}
	}
}

// TestConcurrentAppendOrdering appends from many goroutines to one partition
// while receivers tail it: every batch is contiguous, each producer's batches
// keep their order, and every receiver sees the same sequence.
func TestConcurrentAppendOrdering(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{SegmentBytes: 16 << 10, Fsync: FsyncNever}
			if mode == "disk" {
				cfg.DataDir = t.TempDir()
			}
			n := openNS(t, cfg)
			h := mustHub(t, n, "orders")
			const producers, batches, per = 8, 50, 7
			const total = producers * batches * per
			var readers []*Receiver
			for i := 0; i < 3; i++ {
				r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: strconv.Itoa(i), Start: Earliest()})
				if err != nil {
					t.Fatal(err)
				}
				readers = append(readers, r)
			}
			results := make([][]Event, len(readers))
			var rw sync.WaitGroup
			for i, r := range readers {
				rw.Add(1)
				go func() {
					defer rw.Done()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					for len(results[i]) < total {
						evs, err := r.Next(ctx, 100)
						if err != nil {
							t.Error(err)
							return
						}
						results[i] = append(results[i], evs...)
					}
				}()
			}
			var pw sync.WaitGroup
			for p := 0; p < producers; p++ {
				pw.Add(1)
				go func() {
					defer pw.Done()
					for b := 0; b < batches; b++ {
						msgs := make([][]byte, per)
						for k := range msgs {
							msgs[k] = []byte(fmt.Sprintf("%d/%d/%d", p, b, k))
						}
						if _, err := h.Append("0", nil, msgs); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			pw.Wait()
			rw.Wait()
			if t.Failed() {
				return
			}
			next := make([]int, producers)
			evs := results[0]
			for i := 0; i < total; i += per {
				var p, b, k int
				for j := 0; j < per; j++ {
					e := evs[i+j]
					if e.SequenceNumber != int64(i+j) {
						t.Fatalf("event %d has sequence number %d", i+j, e.SequenceNumber)
					}
					if _, err := fmt.Sscanf(string(e.Message), "%d/%d/%d", &p, &b, &k); err != nil {
						t.Fatal(err)
					}
					if k != j || b != next[p] {
						t.Fatalf("event %d = %s: batch split or reordered (want batch %d of producer %d, item %d)", i+j, e.Message, next[p], p, j)
					}
				}
				next[p]++
			}
			for i := 1; i < len(results); i++ {
				for j := range evs {
					a, b := evs[j], results[i][j]
					if a.SequenceNumber != b.SequenceNumber || a.Offset != b.Offset || !bytes.Equal(a.Message, b.Message) {
						t.Fatalf("reader %d event %d differs: %+v vs %+v", i, j, b, a)
					}
				}
			}
		})
	}
}

// TestNextAllocations: in memory mode Next copies no message: a batch costs
// the event slice, one string for all offsets and keys, and the key slice.
func TestNextAllocations(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		t.Run(fmt.Sprintf("keyed=%v", keyed), func(t *testing.T) {
			n := openNS(t, Config{})
			h := mustHub(t, n, "orders")
			const runs, batch = 50, 300
			var key *string
			if keyed {
				key = ptr("key")
			}
			payload := bytes.Repeat([]byte{1}, 200)
			msgs := make([][]byte, batch)
			for i := range msgs {
				msgs[i] = payload
			}
			for i := 0; i < runs+2; i++ {
				if _, err := h.Append("0", key, msgs); err != nil {
					t.Fatal(err)
				}
			}
			r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "r", Start: Earliest()})
			if err != nil {
				t.Fatal(err)
			}
			drain(t, r, batch) // warm up scratch buffers
			ctx := context.Background()
			allocs := testing.AllocsPerRun(runs, func() {
				evs, err := r.Next(ctx, batch)
				if err != nil || len(evs) != batch {
					t.Fatalf("Next = %d, %v", len(evs), err)
				}
			})
			want := 2.0
			if keyed {
				want = 3
			}
			if allocs > want {
				t.Fatalf("Next allocates %.1f times per batch of %d, want at most %.0f", allocs, batch, want)
			}
		})
	}
}
