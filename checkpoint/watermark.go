package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/sinks"
)

// WatermarkFunc returns the position a sink has durably committed for a
// partition, or nil when it holds nothing of it. ctx bounds the call.
type WatermarkFunc func(ctx context.Context, partitionID string) (*sinks.Position, error)

// WatermarkOptions configures [WithWatermarks]. The zero value (or nil) is
// valid.
type WatermarkOptions struct {
	// PartitionIDs are partitions whose watermark is asked for even when the
	// store holds neither a checkpoint nor an ownership for them. If nil,
	// only the partitions found in the store are asked for, which is enough
	// for the SDK's Processor: it lists checkpoints only after claiming the
	// partition, so the partition has an ownership by then.
	PartitionIDs []string
	// Logger receives a debug log for each partition whose watermark is
	// later than its checkpoint. If nil, logs are discarded.
	Logger *slog.Logger
}

// WatermarkStore is an [azeventhubs.CheckpointStore] whose ListCheckpoints
// merges the stored checkpoints with the sink's watermarks. Made by
// [WithWatermarks]. It is safe for concurrent use if the wrapped store and
// the WatermarkFunc are.
type WatermarkStore struct {
	store     azeventhubs.CheckpointStore
	watermark WatermarkFunc
	ids       []string
	log       *slog.Logger
}

// WithWatermarks wraps store so that ListCheckpoints returns, for each
// partition, the later of the stored checkpoint and the sink's watermark, as
// [Resume] merges them (DESIGN.md invariant 3). The other methods go to
// store unchanged, and nothing is written: a checkpoint moves forward only
// when the runner sets one.
//
// The partitions considered are those with a stored checkpoint, those with
// an ownership in the store, and opts.PartitionIDs. The watermark function is
// called once per partition on every ListCheckpoints, one partition at a
// time; an error from it fails the listing, so the Processor retries on its
// next load-balancing round instead of starting from a stale position.
//
// A partition resumed from a watermark that has only a sequence number is
// returned with a nil Offset, which the SDK's Processor turns into a start
// after that sequence number.
func WithWatermarks(store azeventhubs.CheckpointStore, watermark WatermarkFunc, opts *WatermarkOptions) *WatermarkStore {
	if opts == nil {
		opts = &WatermarkOptions{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &WatermarkStore{store: store, watermark: watermark, ids: slices.Clone(opts.PartitionIDs), log: log}
}

// ClaimOwnership calls the wrapped store.
func (w *WatermarkStore) ClaimOwnership(ctx context.Context, partitionOwnership []azeventhubs.Ownership, options *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return w.store.ClaimOwnership(ctx, partitionOwnership, options)
}

// ListOwnership calls the wrapped store.
func (w *WatermarkStore) ListOwnership(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, options *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return w.store.ListOwnership(ctx, fullyQualifiedNamespace, eventHubName, consumerGroup, options)
}

// SetCheckpoint calls the wrapped store.
func (w *WatermarkStore) SetCheckpoint(ctx context.Context, checkpoint azeventhubs.Checkpoint, options *azeventhubs.SetCheckpointOptions) error {
	return w.store.SetCheckpoint(ctx, checkpoint, options)
}

// ListCheckpoints returns the merged position of every partition that has a
// checkpoint or a watermark, stored checkpoints first, in the wrapped store's
// order, then partitions known only by their watermark, sorted by ID.
func (w *WatermarkStore) ListCheckpoints(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, options *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	stored, err := w.store.ListCheckpoints(ctx, fullyQualifiedNamespace, eventHubName, consumerGroup, options)
	if err != nil {
		return nil, err
	}
	owned, err := w.store.ListOwnership(ctx, fullyQualifiedNamespace, eventHubName, consumerGroup, nil)
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(stored))
	out := make([]azeventhubs.Checkpoint, 0, len(stored))
	for _, cp := range stored {
		seen[cp.PartitionID] = true
		merged, err := w.merge(ctx, &cp, cp)
		if err != nil {
			return nil, err
		}
		out = append(out, merged)
	}
	var extra []string
	for _, o := range owned {
		extra = append(extra, o.PartitionID)
	}
	extra = append(extra, w.ids...)
	slices.Sort(extra)
	for _, id := range slices.Compact(extra) {
		if seen[id] {
			continue
		}
		base := azeventhubs.Checkpoint{
			ConsumerGroup:           consumerGroup,
			EventHubName:            eventHubName,
			FullyQualifiedNamespace: fullyQualifiedNamespace,
			PartitionID:             id,
		}
		merged, err := w.merge(ctx, nil, base)
		if err != nil {
			return nil, err
		}
		if merged.SequenceNumber != nil || merged.Offset != nil {
			out = append(out, merged)
		}
	}
	return out, nil
}

// merge returns base with the position Resume picks from cp and the
// partition's watermark.
func (w *WatermarkStore) merge(ctx context.Context, cp *azeventhubs.Checkpoint, base azeventhubs.Checkpoint) (azeventhubs.Checkpoint, error) {
	wm, err := w.watermark(ctx, base.PartitionID)
	if err != nil {
		return base, fmt.Errorf("checkpoint: watermark of partition %s: %w", base.PartitionID, err)
	}
	r := Resume(cp, wm)
	if r.Source == FromWatermark {
		w.log.Debug("resuming from the sink's watermark", "partition", base.PartitionID, "sequence_number", *r.SequenceNumber)
	}
	base.SequenceNumber, base.Offset = r.SequenceNumber, r.Offset
	return base, nil
}
