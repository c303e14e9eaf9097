package hub

import (
	"bytes"
	"strconv"
	"testing"
	"time"
)

func TestAppendAndReceive(t *testing.T) {
	for _, mode := range []string{"memory", "disk"} {
		t.Run(mode, func(t *testing.T) {
			clk := newClock()
			cfg := Config{Now: clk.Now, SegmentBytes: 300}
			if mode == "disk" {
				cfg.DataDir = t.TempDir()
			}
			n := openNS(t, cfg)
			h := mustHub(t, n, "orders")
			pp, err := h.PartitionProperties("1")
			if err != nil {
				t.Fatal(err)
			}
			want := PartitionProperties{BeginSequenceNumber: 0, LastEnqueuedSequenceNumber: -1, LastEnqueuedOffset: "-1", LastEnqueuedTime: time.Unix(0, 0).UTC(), IsEmpty: true}
			if pp != want {
				t.Fatalf("empty properties = %+v, want %+v", pp, want)
			}
			key := "k"
			var sent int
			for b := 0; b < 20; b++ {
				var msgs [][]byte
				for i := 0; i <= b%3; i++ {
					msgs = append(msgs, msg(sent))
					sent++
				}
				var k *string
				if b%2 == 0 {
					k = &key
				}
				if _, err := h.Append("1", k, msgs); err != nil {
					t.Fatal(err)
				}
				clk.Advance(1500 * time.Microsecond)
			}
			evs := readAll(t, h, "1")
			if len(evs) != sent {
				t.Fatalf("got %d events, want %d", len(evs), sent)
			}
			var lastOff int64 = -1
			var lastMs int64
			for i, e := range evs {
				if e.SequenceNumber != int64(i) || !bytes.Equal(e.Message, msg(i)) {
					t.Fatalf("event %d = seq %d %q", i, e.SequenceNumber, e.Message)
				}
				off, err := strconv.ParseInt(e.Offset, 10, 64)
				if err != nil || off <= lastOff {
					t.Fatalf("event %d offset %q after %d", i, e.Offset, lastOff)
				}
				if ms := e.EnqueuedTime.UnixMilli(); ms < lastMs || !e.EnqueuedTime.Equal(time.UnixMilli(ms)) {
					t.Fatalf("event %d enqueued %v", i, e.EnqueuedTime)
				}
				lastOff, lastMs = off, e.EnqueuedTime.UnixMilli()
			}
			pp, _ = h.PartitionProperties("1")
			last := evs[len(evs)-1]
			want = PartitionProperties{BeginSequenceNumber: 0, LastEnqueuedSequenceNumber: int64(sent - 1), LastEnqueuedOffset: last.Offset, LastEnqueuedTime: last.EnqueuedTime}
			if pp != want {
				t.Fatalf("properties = %+v, want %+v", pp, want)
			}
		})
	}
}
