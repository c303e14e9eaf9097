package emulator

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// memCheckpointStore is an in-memory azeventhubs.CheckpointStore with the
// ETag semantics of the blob store: a claim succeeds only if its ETag
// matches the stored one (or the partition was never owned).
type memCheckpointStore struct {
	mu          sync.Mutex // guards the maps and etag
	ownerships  map[string]azeventhubs.Ownership
	checkpoints map[string]azeventhubs.Checkpoint
	etag        int
}

func newMemCheckpointStore() *memCheckpointStore {
	return &memCheckpointStore{ownerships: map[string]azeventhubs.Ownership{}, checkpoints: map[string]azeventhubs.Checkpoint{}}
}

func storeKey(ns, hub, cg, partition string) string {
	return fmt.Sprintf("%s/%s/%s/%s", ns, hub, cg, partition)
}

func (s *memCheckpointStore) ClaimOwnership(ctx context.Context, claims []azeventhubs.Ownership, _ *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []azeventhubs.Ownership
	for _, o := range claims {
		k := storeKey(o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup, o.PartitionID)
		cur, exists := s.ownerships[k]
		if exists && (o.ETag == nil || cur.ETag == nil || *o.ETag != *cur.ETag) {
			continue
		}
		s.etag++
		tag := azcore.ETag(fmt.Sprint(s.etag))
		o.ETag = &tag
		o.LastModifiedTime = time.Now()
		s.ownerships[k] = o
		out = append(out, o)
	}
	return out, nil
}

func (s *memCheckpointStore) ListCheckpoints(ctx context.Context, ns, hub, cg string, _ *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []azeventhubs.Checkpoint
	for _, c := range s.checkpoints {
		if c.FullyQualifiedNamespace == ns && c.EventHubName == hub && c.ConsumerGroup == cg {
			out = append(out, c)
		}
	}
	return out, nil
}

func (s *memCheckpointStore) ListOwnership(ctx context.Context, ns, hub, cg string, _ *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []azeventhubs.Ownership
	for _, o := range s.ownerships {
		if o.FullyQualifiedNamespace == ns && o.EventHubName == hub && o.ConsumerGroup == cg {
			out = append(out, o)
		}
	}
	return out, nil
}

func (s *memCheckpointStore) SetCheckpoint(ctx context.Context, c azeventhubs.Checkpoint, _ *azeventhubs.SetCheckpointOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checkpoints[storeKey(c.FullyQualifiedNamespace, c.EventHubName, c.ConsumerGroup, c.PartitionID)] = c
	return nil
}

// owners returns how many partitions each owner holds, ignoring
// ownerships older than expiry.
func (s *memCheckpointStore) owners(expiry time.Duration) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, o := range s.ownerships {
		if o.OwnerID != "" && time.Since(o.LastModifiedTime) < expiry {
			out[o.OwnerID]++
		}
	}
	return out
}
