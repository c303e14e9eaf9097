package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
)

// leaseReader is a checkpoint store that reads one partition's lease on
// its own. A replica checks its lease before each checkpoint: one blob's
// properties are a read, which Blob Storage bills at a thirteenth of a
// List of the consumer group's leases.
type leaseReader interface {
	// Lease returns the ownership of one partition; found is false when
	// the partition has none.
	Lease(ctx context.Context, ns, hub, group, partition string) (o azeventhubs.Ownership, found bool, err error)
}

// readLease reads one partition's lease through store when it is a
// leaseReader (a wrapper of a store that is not one answers
// errors.ErrUnsupported); ok is false when it is not. Every store of this
// package and its wrappers have a Lease method of this shape: the source
// reads a lease through it, and lists the leases where a store has none.
func readLease(ctx context.Context, store azeventhubs.CheckpointStore, ns, hub, group, partition string) (o azeventhubs.Ownership, found, ok bool, err error) {
	lr, ok := store.(leaseReader)
	if !ok {
		return azeventhubs.Ownership{}, false, false, nil
	}
	o, found, err = lr.Lease(ctx, ns, hub, group, partition)
	if errors.Is(err, errors.ErrUnsupported) {
		return azeventhubs.Ownership{}, false, false, nil
	}
	return o, found, true, err
}

// Lease reads the properties of the partition's ownership blob, named as
// the SDK's store names it.
func (s *BlobStore) Lease(ctx context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error) {
	name := fmt.Sprintf("%s/%s/%s/ownership/%s", ns, hub, group, partition)
	props, err := s.cc.NewBlobClient(name).GetProperties(ctx, nil)
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		return azeventhubs.Ownership{}, false, nil
	case err != nil:
		return azeventhubs.Ownership{}, false, fmt.Errorf("checkpoint: blob container %s partition %s: reading the lease: %w", s.container, partition, err)
	}
	o := azeventhubs.Ownership{FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: group, PartitionID: partition, ETag: props.ETag}
	if props.LastModified != nil {
		o.LastModifiedTime = *props.LastModified
	}
	// The service returns metadata keys in the case they were written
	// with; the SDK writes "ownerid".
	for k, v := range props.Metadata {
		if strings.EqualFold(k, "ownerid") && v != nil {
			o.OwnerID = *v
		}
	}
	return o, true, nil
}

// Lease reads the partition's ownership file.
func (s *FileStore) Lease(_ context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error) {
	dir, err := s.groupDir(ns, hub, group, "ownership")
	if err != nil {
		return azeventhubs.Ownership{}, false, err
	}
	if err := checkName("partition", partition); err != nil {
		return azeventhubs.Ownership{}, false, err
	}
	var fo fileOwnership
	switch err := readJSON(filepath.Join(dir, partition), &fo); {
	case errors.Is(err, fs.ErrNotExist):
		return azeventhubs.Ownership{}, false, nil
	case err != nil:
		return azeventhubs.Ownership{}, false, fmt.Errorf("checkpoint: ownership of partition %s: %w", partition, err)
	}
	etag := azcore.ETag(fo.ETag)
	return azeventhubs.Ownership{
		FullyQualifiedNamespace: ns, EventHubName: hub, ConsumerGroup: group, PartitionID: partition,
		OwnerID: fo.OwnerID, LastModifiedTime: fo.LastModified, ETag: &etag,
	}, true, nil
}

// Lease reads the lowercase lease, falling back to the as-written one.
func (l *LowercaseStore) Lease(ctx context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error) {
	n := names{ns, hub, group}
	lo := n.lower()
	o, found, ok, err := readLease(ctx, l.store, lo.ns, lo.eh, lo.cg, partition)
	if !ok {
		return azeventhubs.Ownership{}, false, errors.ErrUnsupported
	}
	if err == nil && !found && lo != n {
		o, found, _, err = readLease(ctx, l.store, n.ns, n.eh, n.cg, partition)
	}
	o.FullyQualifiedNamespace, o.EventHubName, o.ConsumerGroup = n.ns, n.eh, n.cg
	return o, found, err
}

// Lease reads the lease under the stored namespace.
func (a *namespaceAlias) Lease(ctx context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error) {
	o, found, ok, err := readLease(ctx, a.store, a.in(ns), hub, group, partition)
	if !ok {
		return azeventhubs.Ownership{}, false, errors.ErrUnsupported
	}
	o.FullyQualifiedNamespace = a.out(o.FullyQualifiedNamespace)
	return o, found, err
}
