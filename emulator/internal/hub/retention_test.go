package hub

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestRetentionByAge(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			clk := newClock()
			cfg := Config{Now: clk.Now, Retention: time.Hour, SegmentBytes: 200,
				RetentionCheckEvery: time.Hour, // the test calls EnforceRetention itself
				Hubs:                []HubConfig{{Name: "orders", Partitions: 1}}}
			if mode == "disk" {
				cfg.DataDir = t.TempDir()
			}
			n := openNS(t, cfg)
			h := mustHub(t, n, "orders")
			// 30 events, one minute apart: t0, t0+1m, ..., t0+29m.
			for i := 0; i < 30; i++ {
				if _, err := h.Append("0", nil, [][]byte{msg(i)}); err != nil {
					t.Fatal(err)
				}
				clk.Advance(time.Minute)
			}
			early, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "early", Start: AtSequenceNumber(0, true)})
			if err != nil {
				t.Fatal(err)
			}
			if evs := drain(t, early, 3); evs[0].SequenceNumber != 0 {
				t.Fatalf("first event %d", evs[0].SequenceNumber)
			}
			check := func(wantBegin int64) {
				t.Helper()
				if err := n.EnforceRetention(); err != nil {
					t.Fatal(err)
				}
				pp, _ := h.PartitionProperties("0")
				if pp.BeginSequenceNumber != wantBegin || pp.LastEnqueuedSequenceNumber != 29 || pp.IsEmpty != (wantBegin == 30) {
					t.Fatalf("properties %+v, want begin %d", pp, wantBegin)
				}
			}
			check(0) // now = t0+30m: everything younger than 1h
			clk.Advance(40 * time.Minute)
			// now = t0+70m: events enqueued at or before t0+10m are gone.
			check(11)
			// A receiver behind the retained start continues at the first retained event.
			evs := drain(t, early, 1)
			if evs[0].SequenceNumber != 11 {
				t.Fatalf("receiver behind retention got %d, want 11", evs[0].SequenceNumber)
			}
			r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "new", Start: Earliest()})
			if err != nil {
				t.Fatal(err)
			}
			if evs := drain(t, r, 19); evs[0].SequenceNumber != 11 || evs[18].SequenceNumber != 29 {
				t.Fatalf("earliest got %d..%d", evs[0].SequenceNumber, evs[18].SequenceNumber)
			}
			if mode == "disk" {
				// Segments holding only expired events are deleted; the first
				// remaining one holds the first retained event.
				files := segFiles(t, filepath.Join(cfg.DataDir, "orders", "0"))
				p := h.layout.Load().parts[0]
				p.mu.Lock()
				first, segs := p.segs[0], len(p.segs)
				p.mu.Unlock()
				if len(files) != segs || len(files) < 2 || first.baseSeq > 11 || first.end() <= 11 || filepath.Base(files[0]) != filepath.Base(first.path) {
					t.Fatalf("%d files %v for %d segments, first segment [%d, %d)", len(files), files, segs, first.baseSeq, first.end())
				}
				if first.baseSeq == 0 {
					t.Fatalf("no segment was deleted")
				}
			}
			clk.Advance(time.Hour)
			check(30)
			pp, _ := h.PartitionProperties("0")
			if pp.LastEnqueuedOffset == "-1" || pp.LastEnqueuedTime.IsZero() {
				t.Fatalf("last enqueued forgotten: %+v", pp)
			}
			if _, err := h.Append("0", nil, [][]byte{[]byte("fresh")}); err != nil {
				t.Fatal(err)
			}
			if evs := drain(t, r, 1); evs[0].SequenceNumber != 30 || string(evs[0].Message) != "fresh" {
				t.Fatalf("after full expiry got %+v", evs[0])
			}
		})
	}
}

func TestRetentionBySize(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			const limit = 2000
			cfg := Config{RetentionBytes: limit, SegmentBytes: 600, RetentionCheckEvery: time.Hour,
				Hubs: []HubConfig{{Name: "orders", Partitions: 1}}}
			if mode == "disk" {
				cfg.DataDir = t.TempDir()
			}
			n := openNS(t, cfg)
			h := mustHub(t, n, "orders")
			recLen := int64(recordLen(nil, msg(0)))
			for i := 0; i < 500; i++ {
				if _, err := h.Append("0", nil, [][]byte{msg(i)}); err != nil {
					t.Fatal(err)
				}
				pp, _ := h.PartitionProperties("0")
				retained := (pp.LastEnqueuedSequenceNumber - pp.BeginSequenceNumber + 1) * recLen
				if retained > limit || (int64(i+1)*recLen > limit && retained <= limit-recLen) {
					t.Fatalf("after %d appends %d bytes retained (%+v), want just under %d", i+1, retained, pp, limit)
				}
			}
			p := h.layout.Load().parts[0]
			p.mu.Lock()
			segs := len(p.segs)
			p.mu.Unlock()
			if max := limit/600 + 3; segs > max {
				t.Fatalf("%d segments kept, want at most %d", segs, max)
			}
			if mode == "disk" {
				if files := segFiles(t, filepath.Join(cfg.DataDir, "orders", "0")); len(files) != segs {
					t.Fatalf("%d files for %d segments", len(files), segs)
				}
			}
			evs := readAll(t, h, "0")
			if last := evs[len(evs)-1]; last.SequenceNumber != 499 || string(last.Message) != string(msg(499)) {
				t.Fatalf("last = %+v", last)
			}
		})
	}
}

// TestRetentionWhileReading drops segments a disk reader is positioned in;
// the reader continues at the first retained event.
func TestRetentionWhileReading(t *testing.T) {
	clk := newClock()
	cfg := Config{DataDir: t.TempDir(), Now: clk.Now, Retention: time.Minute, SegmentBytes: 300, RetentionCheckEvery: time.Hour,
		Hubs: []HubConfig{{Name: "orders", Partitions: 1}}}
	n := openNS(t, cfg)
	h := mustHub(t, n, "orders")
	for i := 0; i < 50; i++ {
		if _, err := h.Append("0", nil, [][]byte{msg(i)}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := h.OpenReceiver(ReceiverOptions{Partition: "0", Name: "r", Start: Earliest()})
	if err != nil {
		t.Fatal(err)
	}
	drain(t, r, 5)
	clk.Advance(2 * time.Minute)
	if _, err := h.Append("0", nil, [][]byte{msg(50)}); err != nil {
		t.Fatal(err)
	}
	if err := n.EnforceRetention(); err != nil {
		t.Fatal(err)
	}
	evs, err := r.Next(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].SequenceNumber != 50 {
		t.Fatalf("got %d events starting at %d, want only 50", len(evs), evs[0].SequenceNumber)
	}
}

func TestRetentionAppliedOnReopen(t *testing.T) {
	clk := newClock()
	cfg := Config{DataDir: t.TempDir(), Now: clk.Now, Retention: time.Hour, SegmentBytes: 300, RetentionCheckEvery: time.Hour,
		Hubs: []HubConfig{{Name: "orders", Partitions: 1}}}
	n, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := mustHub(t, n, "orders")
	for i := 0; i < 20; i++ {
		if _, err := h.Append("0", nil, [][]byte{msg(i)}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Minute)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// now = t0+200m; events younger than 1h (t0+150m .. t0+190m, seq 15..19) remain.
	n2 := openNS(t, cfg)
	pp, _ := mustHub(t, n2, "orders").PartitionProperties("0")
	if pp.BeginSequenceNumber != 15 || pp.LastEnqueuedSequenceNumber != 19 {
		t.Fatalf("after reopen %+v, want begin 15 last 19", pp)
	}
}
