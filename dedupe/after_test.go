package dedupe_test

import (
	"testing"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/sinks"
)

func seqs(events []sinks.Event) []int64 {
	out := make([]int64, len(events))
	for i := range events {
		out[i] = events[i].SequenceNumber
	}
	return out
}

func TestAfter(t *testing.T) {
	batch := []sinks.Event{{SequenceNumber: 5}, {SequenceNumber: 6}, {SequenceNumber: 7}}
	tests := []struct {
		name string
		w    *sinks.Position
		want []int64
	}{
		{"no watermark", nil, []int64{5, 6, 7}},
		{"below batch", &sinks.Position{SequenceNumber: 2}, []int64{5, 6, 7}},
		{"covers first", &sinks.Position{SequenceNumber: 5}, []int64{6, 7}},
		{"covers middle", &sinks.Position{SequenceNumber: 6}, []int64{7}},
		{"covers all", &sinks.Position{SequenceNumber: 7}, []int64{}},
		{"beyond batch", &sinks.Position{SequenceNumber: 100}, []int64{}},
		{"watermark -1", &sinks.Position{SequenceNumber: -1}, []int64{5, 6, 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := seqs(dedupe.After(batch, tt.w))
			if len(got) != len(tt.want) {
				t.Fatalf("After = %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("After = %v, want %v", got, tt.want)
				}
			}
		})
	}
	if got := dedupe.After(nil, &sinks.Position{}); len(got) != 0 {
		t.Fatalf("After(nil) = %v", got)
	}
}
