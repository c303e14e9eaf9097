package checkpoint_test

import (
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/sinks"
)

func ptr[T any](v T) *T { return &v }

func cp(seq *int64, off *string) *azeventhubs.Checkpoint {
	return &azeventhubs.Checkpoint{PartitionID: "0", SequenceNumber: seq, Offset: off}
}

func TestResume(t *testing.T) {
	tests := []struct {
		name      string
		cp        *azeventhubs.Checkpoint
		wm        *sinks.Position
		wantSeq   *int64
		wantOff   *string
		wantSrc   checkpoint.Source
		wantStart azeventhubs.StartPosition // with def = Earliest
	}{
		{
			name:      "neither",
			wantSrc:   checkpoint.FromStart,
			wantStart: azeventhubs.StartPosition{Earliest: ptr(true)},
		},
		{
			name:      "empty checkpoint counts as none",
			cp:        cp(nil, nil),
			wantSrc:   checkpoint.FromStart,
			wantStart: azeventhubs.StartPosition{Earliest: ptr(true)},
		},
		{
			name:      "checkpoint only",
			cp:        cp(ptr[int64](10), ptr("1000")),
			wantSeq:   ptr[int64](10),
			wantOff:   ptr("1000"),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{Offset: ptr("1000")},
		},
		{
			name:      "watermark only with offset",
			wm:        &sinks.Position{SequenceNumber: 7, Offset: "700"},
			wantSeq:   ptr[int64](7),
			wantOff:   ptr("700"),
			wantSrc:   checkpoint.FromWatermark,
			wantStart: azeventhubs.StartPosition{Offset: ptr("700")},
		},
		{
			name:      "watermark only, sequence number only",
			wm:        &sinks.Position{SequenceNumber: 7},
			wantSeq:   ptr[int64](7),
			wantSrc:   checkpoint.FromWatermark,
			wantStart: azeventhubs.StartPosition{SequenceNumber: ptr[int64](7)},
		},
		{
			name:      "watermark ahead drops the checkpoint's stale offset",
			cp:        cp(ptr[int64](10), ptr("1000")),
			wm:        &sinks.Position{SequenceNumber: 25},
			wantSeq:   ptr[int64](25),
			wantSrc:   checkpoint.FromWatermark,
			wantStart: azeventhubs.StartPosition{SequenceNumber: ptr[int64](25)},
		},
		{
			name:      "watermark ahead with its own offset",
			cp:        cp(ptr[int64](10), ptr("1000")),
			wm:        &sinks.Position{SequenceNumber: 25, Offset: "2500"},
			wantSeq:   ptr[int64](25),
			wantOff:   ptr("2500"),
			wantSrc:   checkpoint.FromWatermark,
			wantStart: azeventhubs.StartPosition{Offset: ptr("2500")},
		},
		{
			name:      "checkpoint ahead of watermark",
			cp:        cp(ptr[int64](30), ptr("3000")),
			wm:        &sinks.Position{SequenceNumber: 25, Offset: "2500"},
			wantSeq:   ptr[int64](30),
			wantOff:   ptr("3000"),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{Offset: ptr("3000")},
		},
		{
			name:      "tie keeps the checkpoint",
			cp:        cp(ptr[int64](25), ptr("2500")),
			wm:        &sinks.Position{SequenceNumber: 25},
			wantSeq:   ptr[int64](25),
			wantOff:   ptr("2500"),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{Offset: ptr("2500")},
		},
		{
			name:      "tie takes the watermark's offset when the checkpoint has none",
			cp:        cp(ptr[int64](25), nil),
			wm:        &sinks.Position{SequenceNumber: 25, Offset: "2500"},
			wantSeq:   ptr[int64](25),
			wantOff:   ptr("2500"),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{Offset: ptr("2500")},
		},
		{
			name:      "offset-only checkpoint cannot be ordered and wins",
			cp:        cp(nil, ptr("1000")),
			wm:        &sinks.Position{SequenceNumber: 99},
			wantOff:   ptr("1000"),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{Offset: ptr("1000")},
		},
		{
			name:      "sequence-only checkpoint",
			cp:        cp(ptr[int64](3), nil),
			wantSeq:   ptr[int64](3),
			wantSrc:   checkpoint.FromCheckpoint,
			wantStart: azeventhubs.StartPosition{SequenceNumber: ptr[int64](3)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkpoint.Resume(tt.cp, tt.wm)
			if got.Source != tt.wantSrc {
				t.Errorf("Source = %v, want %v", got.Source, tt.wantSrc)
			}
			if !eqPtr(got.SequenceNumber, tt.wantSeq) {
				t.Errorf("SequenceNumber = %v, want %v", show(got.SequenceNumber), show(tt.wantSeq))
			}
			if !eqPtr(got.Offset, tt.wantOff) {
				t.Errorf("Offset = %v, want %v", show(got.Offset), show(tt.wantOff))
			}
			start := got.StartPosition(azeventhubs.StartPosition{Earliest: ptr(true)})
			if !eqStart(start, tt.wantStart) {
				t.Errorf("StartPosition = %+v, want %+v", start, tt.wantStart)
			}
		})
	}
}

func TestResumeDoesNotAliasInputs(t *testing.T) {
	wm := &sinks.Position{SequenceNumber: 5, Offset: "50"}
	got := checkpoint.Resume(nil, wm)
	wm.SequenceNumber, wm.Offset = 6, "60"
	if *got.SequenceNumber != 5 || *got.Offset != "50" {
		t.Fatalf("result changed with its input: seq %d offset %s", *got.SequenceNumber, *got.Offset)
	}
}

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func show[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func eqStart(a, b azeventhubs.StartPosition) bool {
	return eqPtr(a.Offset, b.Offset) && eqPtr(a.SequenceNumber, b.SequenceNumber) &&
		eqPtr(a.Earliest, b.Earliest) && eqPtr(a.Latest, b.Latest) && a.Inclusive == b.Inclusive &&
		(a.EnqueuedTime == nil) == (b.EnqueuedTime == nil)
}
