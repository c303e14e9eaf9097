package checkpoint

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// LowercaseOptions configures [Lowercase]. The zero value (or nil) is valid.
type LowercaseOptions struct {
	// Logger receives an info log for each checkpoint migrated from its
	// as-written name. If nil, logs are discarded.
	Logger *slog.Logger
}

// LowercaseStore is an [azeventhubs.CheckpointStore] that stores state under
// lowercase names. Made by [Lowercase]. It is safe for concurrent use if the
// wrapped store is.
type LowercaseStore struct {
	store azeventhubs.CheckpointStore
	log   *slog.Logger

	// The as-written names are listed until nothing there is missing
	// from the lowercase ones: the processor lists ownership every
	// round, and with the SDK's default consumer group ("$Default") a
	// second listing each round would double the store's most costly
	// requests for as long as the process runs.
	mu         sync.Mutex
	legacyDone map[asWritten]bool
}

// asWritten names what no longer needs the as-written names: the ownership
// (none there lacks a lowercase one) or the checkpoints (each migrated or
// superseded) of one event hub and consumer group.
type asWritten struct {
	names
	checkpoints bool
}

// checkpointCreator is implemented by the stores whose checkpoints can be
// created only-if-absent, which a migration needs so that it never replaces
// a checkpoint another replica has just written.
type checkpointCreator interface {
	createCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint) (bool, error)
}

// Lowercase wraps store so that checkpoints and ownership are written under
// the lowercase namespace, event hub and consumer group, as the .NET, Java,
// JavaScript and Python SDKs and KEDA's scaler name their blobs (for
// emulator endpoints, checkpoints are also copied where the JavaScript SDK
// reads them; see [lowercaseStore.SetCheckpoint]). The Go SDK
// uses the names as given, so a consumer group configured as "$Default" by
// one tool and read as "$default" by another would fork the state and replay
// the hub.
//
// Reads fall back to the as-written names, partition by partition:
//
//   - ListCheckpoints returns, for each partition with no lowercase
//     checkpoint, the as-written one, and migrates it: it writes it under the
//     lowercase name only if none exists there yet (the wrapped store must be
//     a [FileStore] or a [BlobStore] for that; over another store the
//     fallback is read but not written). A migration that finds a lowercase
//     checkpoint written meanwhile keeps that one, so nothing moves back.
//   - ListOwnership returns, for each partition with no lowercase ownership,
//     the as-written one with a nil ETag: its ETag belongs to the other name,
//     and a claim without an ETag creates the lowercase ownership only if
//     none exists, so exactly one claimant wins it. The ownership migrates
//     with that claim; its owner and time still count for load balancing
//     until then.
//
// The as-written names stop being listed once they hold nothing the
// lowercase ones lack (every ownership there claimed anew, every checkpoint
// migrated), so that a steady processor lists once per round.
//
// Returned values carry the names the caller passed, as the SDK's stores
// do; the SDK's Processor passes them back unchanged in claims and
// checkpoints, and this store lowercases them on the way in. The as-written
// blobs are left in place.
//
// A processor that still writes only the as-written names (an older ehsink,
// or another Go SDK program) and this store see each other's ownership only
// until one of them claims under its own name; run one naming at a time and
// let the sinks' watermarks absorb the overlap.
func Lowercase(store azeventhubs.CheckpointStore, opts *LowercaseOptions) *LowercaseStore {
	if opts == nil {
		opts = &LowercaseOptions{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &LowercaseStore{store: store, log: log}
}

type names struct{ ns, eh, cg string }

func (n names) lower() names {
	return names{strings.ToLower(n.ns), strings.ToLower(n.eh), strings.ToLower(n.cg)}
}

// jsNamespace returns the name the JavaScript SDK gives the namespace of
// the same endpoint, lowercase: the host without the port. It differs from
// the Go SDK's name (host:port) only for endpoints with a port, that is
// emulators; real namespaces (name.servicebus.windows.net) have none.
func jsNamespace(ns string) string {
	if host, port, err := net.SplitHostPort(ns); err == nil && port != "" {
		ns = host
	}
	return strings.ToLower(ns)
}

// ClaimOwnership claims under the lowercase names.
func (l *LowercaseStore) ClaimOwnership(ctx context.Context, partitionOwnership []azeventhubs.Ownership, options *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	type key struct {
		names
		pid string
	}
	orig := make(map[key]names, len(partitionOwnership))
	lowered := make([]azeventhubs.Ownership, len(partitionOwnership))
	for i, o := range partitionOwnership {
		n := names{o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup}
		lo := n.lower()
		orig[key{lo, o.PartitionID}] = n
		o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup = lo.ns, lo.eh, lo.cg
		lowered[i] = o
	}
	won, err := l.store.ClaimOwnership(ctx, lowered, options)
	if err != nil {
		return nil, err
	}
	for i, o := range won {
		if n, ok := orig[key{names{o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup}, o.PartitionID}]; ok {
			won[i].FullyQualifiedNamespace, won[i].EventHubName, won[i].ConsumerGroup = n.ns, n.eh, n.cg
		}
	}
	return won, nil
}

// ListOwnership lists the lowercase ownership, falling back per partition
// to the as-written one (with a nil ETag).
func (l *LowercaseStore) ListOwnership(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, options *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	n := names{fullyQualifiedNamespace, eventHubName, consumerGroup}
	lo := n.lower()
	out, err := l.store.ListOwnership(ctx, lo.ns, lo.eh, lo.cg, options)
	if err != nil {
		return nil, err
	}
	if lo != n && !l.done(asWritten{n, false}) {
		seen := make(map[string]bool, len(out))
		for _, o := range out {
			seen[o.PartitionID] = true
		}
		legacy, err := l.store.ListOwnership(ctx, n.ns, n.eh, n.cg, options)
		if err != nil {
			return nil, err
		}
		merged := true
		for _, o := range legacy {
			if !seen[o.PartitionID] {
				o.ETag = nil
				out = append(out, o)
				merged = false
			}
		}
		if merged {
			l.markDone(asWritten{n, false})
		}
	}
	for i := range out {
		out[i].FullyQualifiedNamespace, out[i].EventHubName, out[i].ConsumerGroup = n.ns, n.eh, n.cg
	}
	return out, nil
}

// ListCheckpoints lists the lowercase checkpoints, falling back per
// partition to the as-written one and migrating it.
func (l *LowercaseStore) ListCheckpoints(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, options *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	n := names{fullyQualifiedNamespace, eventHubName, consumerGroup}
	lo := n.lower()
	out, err := l.store.ListCheckpoints(ctx, lo.ns, lo.eh, lo.cg, options)
	if err != nil {
		return nil, err
	}
	if lo != n && !l.done(asWritten{n, true}) {
		if out, err = l.fallback(ctx, n, lo, out, options); err != nil {
			return nil, err
		}
	}
	for i := range out {
		out[i].FullyQualifiedNamespace, out[i].EventHubName, out[i].ConsumerGroup = n.ns, n.eh, n.cg
	}
	return out, nil
}

// fallback adds the as-written checkpoints of partitions missing from
// current and migrates them.
func (l *LowercaseStore) fallback(ctx context.Context, n, lo names, current []azeventhubs.Checkpoint, options *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	seen := make(map[string]bool, len(current))
	for _, cp := range current {
		seen[cp.PartitionID] = true
	}
	legacy, err := l.store.ListCheckpoints(ctx, n.ns, n.eh, n.cg, options)
	if err != nil {
		return nil, err
	}
	creator, canMigrate := l.store.(checkpointCreator)
	raced, migrated := false, true
	for _, cp := range legacy {
		if seen[cp.PartitionID] {
			continue
		}
		current = append(current, cp)
		if !canMigrate || cp.SequenceNumber == nil || cp.Offset == nil {
			migrated = false
			continue
		}
		migrated := cp
		migrated.FullyQualifiedNamespace, migrated.EventHubName, migrated.ConsumerGroup = lo.ns, lo.eh, lo.cg
		created, err := creator.createCheckpoint(ctx, migrated)
		if err != nil {
			return nil, err
		}
		if created {
			l.log.Info("migrated checkpoint to lowercase names", "partition", cp.PartitionID,
				"from", n.ns+"/"+n.eh+"/"+n.cg, "to", lo.ns+"/"+lo.eh+"/"+lo.cg, "sequence_number", *cp.SequenceNumber)
		} else {
			raced = true
		}
	}
	if migrated {
		// each as-written checkpoint now has a lowercase one (this
		// migration's, or a newer one another replica wrote)
		l.markDone(asWritten{n, true})
	}
	if !raced {
		return current, nil
	}
	// Another replica wrote a lowercase checkpoint between the two listings:
	// it is newer than the as-written one, so it wins.
	fresh, err := l.store.ListCheckpoints(ctx, lo.ns, lo.eh, lo.cg, options)
	if err != nil {
		return nil, err
	}
	byID := make(map[string]int, len(current))
	for i, cp := range current {
		byID[cp.PartitionID] = i
	}
	for _, cp := range fresh {
		if i, ok := byID[cp.PartitionID]; ok {
			current[i] = cp
		} else {
			current = append(current, cp)
		}
	}
	return current, nil
}

func (l *LowercaseStore) done(k asWritten) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.legacyDone[k]
}

func (l *LowercaseStore) markDone(k asWritten) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.legacyDone == nil {
		l.legacyDone = map[asWritten]bool{}
	}
	l.legacyDone[k] = true
}

// SetCheckpoint writes under the lowercase names. For a namespace with a
// port (an emulator endpoint, which the Go SDK, Python SDK and KEDA name
// host:port) it also writes the checkpoint under the host alone, where the
// JavaScript SDK's Blob checkpoint store reads it (see [jsNamespace]), so a
// JavaScript consumer sharing the container resumes where ehsink stopped.
func (l *LowercaseStore) SetCheckpoint(ctx context.Context, checkpoint azeventhubs.Checkpoint, options *azeventhubs.SetCheckpointOptions) error {
	lo := names{checkpoint.FullyQualifiedNamespace, checkpoint.EventHubName, checkpoint.ConsumerGroup}.lower()
	checkpoint.FullyQualifiedNamespace, checkpoint.EventHubName, checkpoint.ConsumerGroup = lo.ns, lo.eh, lo.cg
	if err := l.store.SetCheckpoint(ctx, checkpoint, options); err != nil {
		return err
	}
	if js := jsNamespace(lo.ns); js != lo.ns {
		checkpoint.FullyQualifiedNamespace = js
		if err := l.store.SetCheckpoint(ctx, checkpoint, options); err != nil {
			return fmt.Errorf("copy of the checkpoint for the JavaScript SDK under namespace %q: %w", js, err)
		}
	}
	return nil
}
