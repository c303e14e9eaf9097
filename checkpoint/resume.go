package checkpoint

import (
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/sinks"
)

// origin says where a partition's resume position came from.
type origin int

const (
	// fromStart means there is neither a checkpoint nor a watermark: the
	// connector's configured start position applies.
	fromStart origin = iota
	// fromCheckpoint means the stored checkpoint is the later position (or
	// the only one, or the two cannot be ordered).
	fromCheckpoint
	// fromWatermark means the sink's committed watermark is later than the
	// stored checkpoint (or there is no checkpoint).
	fromWatermark
)

// String names the source for logs.
func (s origin) String() string {
	switch s {
	case fromStart:
		return "start"
	case fromCheckpoint:
		return "checkpoint"
	case fromWatermark:
		return "watermark"
	default:
		return "unknown"
	}
}

// ResumePoint is the last event of a partition already processed: the
// partition resumes right after it.
type ResumePoint struct {
	// SequenceNumber of the last processed event; nil with fromStart, or for
	// a checkpoint that only has an offset.
	SequenceNumber *int64
	// Offset of the last processed event; nil when it is not known (a
	// watermark that only has a sequence number).
	Offset *string
	// Source says which input won: "start", "checkpoint" or "watermark"
	// (its String).
	Source origin
}

// FromStart reports that there is neither a checkpoint nor a watermark:
// the connector's configured start position applies.
func (r ResumePoint) FromStart() bool { return r.Source == fromStart }

// StartPosition returns where a partition client should start, the way the
// SDK's Processor turns a checkpoint into one: after the offset when it is
// known, else after the sequence number, else def.
func (r ResumePoint) StartPosition(def azeventhubs.StartPosition) azeventhubs.StartPosition {
	switch {
	case r.Offset != nil:
		return azeventhubs.StartPosition{Offset: r.Offset}
	case r.SequenceNumber != nil:
		return azeventhubs.StartPosition{SequenceNumber: r.SequenceNumber}
	default:
		return def
	}
}

// Resume merges a partition's stored checkpoint with the watermark its sink
// reports as durably committed (DESIGN.md invariant 3) and returns the later
// of the two, ordered by sequence number. Either may be nil; a checkpoint
// with neither a sequence number nor an offset counts as none.
//
// The offset is kept whenever it names the winning event, because the SDK
// starts from an offset in preference to a sequence number. When the
// watermark wins, the result never carries the checkpoint's offset: it names
// an earlier event, and the Processor would start there instead. On a tie the
// checkpoint wins and the offset comes from whichever input has one.
//
// A checkpoint with an offset but no sequence number cannot be ordered
// against a watermark (offsets are opaque); the checkpoint wins then. That is
// the safe side: checkpoints are written only after the sink commits, so the
// checkpoint is normally the earlier one, and re-reading what the sink holds
// produces no duplicates (sinks drop what their watermark covers), whereas
// skipping would lose events.
func Resume(cp *azeventhubs.Checkpoint, watermark *sinks.Position) ResumePoint {
	if cp != nil && cp.SequenceNumber == nil && cp.Offset == nil {
		cp = nil
	}
	switch {
	case cp == nil && watermark == nil:
		return ResumePoint{Source: fromStart}
	case watermark == nil || (cp != nil && cp.SequenceNumber == nil):
		return ResumePoint{SequenceNumber: cp.SequenceNumber, Offset: cp.Offset, Source: fromCheckpoint}
	case cp == nil || watermark.SequenceNumber > *cp.SequenceNumber:
		seq := watermark.SequenceNumber
		return ResumePoint{SequenceNumber: &seq, Offset: offsetOf(watermark), Source: fromWatermark}
	case watermark.SequenceNumber == *cp.SequenceNumber && cp.Offset == nil:
		return ResumePoint{SequenceNumber: cp.SequenceNumber, Offset: offsetOf(watermark), Source: fromCheckpoint}
	default:
		return ResumePoint{SequenceNumber: cp.SequenceNumber, Offset: cp.Offset, Source: fromCheckpoint}
	}
}

func offsetOf(p *sinks.Position) *string {
	if p.Offset == "" {
		return nil
	}
	off := p.Offset
	return &off
}
