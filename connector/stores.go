package connector

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
)

// EmulatorNamespace is the namespace under which checkpoints, ownership and
// sink watermarks of connectors reading the in-process emulator are kept.
// The emulator listens on a free port, and the SDK names the namespace after
// host:port, so without this alias every run would find its state under a
// new name and start over.
const EmulatorNamespace = "emulator"

// NewCheckpointStore builds the store a connector's checkpoint spec names —
// Azure Blob Storage or local files — wrapped so that names are lowercase
// (readable by the other Azure SDKs and KEDA, with as-written state migrated).
// ctx bounds the call only.
func NewCheckpointStore(ctx context.Context, spec CheckpointSpec, log *slog.Logger) (azeventhubs.CheckpointStore, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var store azeventhubs.CheckpointStore
	if b := spec.Blob; b != nil {
		bs, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{
			Connection: b.Connection,
			AccountURL: b.AccountURL,
			Container:  b.Container,
			Logger:     log,
		})
		if err != nil {
			return nil, fmt.Errorf("blob store (container %q): %w", b.Container, err)
		}
		store = bs
	} else {
		dir := defaultCheckpointDir
		if spec.File != nil && spec.File.Dir != "" {
			dir = spec.File.Dir
		}
		fs, err := checkpoint.NewFileStore(filepath.FromSlash(dir), nil)
		if err != nil {
			return nil, fmt.Errorf("file store %s: %w", dir, err)
		}
		store = fs
	}
	return checkpoint.Lowercase(store, &checkpoint.LowercaseOptions{Logger: log}), nil
}

// aliasNamespace makes store keep the state of namespace actual under the
// name stored, and hands it back under actual.
func aliasNamespace(store azeventhubs.CheckpointStore, actual, stored string) azeventhubs.CheckpointStore {
	if actual == stored {
		return store
	}
	return &namespaceAlias{store: store, actual: actual, stored: stored}
}

type namespaceAlias struct {
	store          azeventhubs.CheckpointStore
	actual, stored string
}

func (a *namespaceAlias) in(ns string) string {
	if ns == a.actual {
		return a.stored
	}
	return ns
}

func (a *namespaceAlias) out(ns string) string {
	if ns == a.stored {
		return a.actual
	}
	return ns
}

func (a *namespaceAlias) ClaimOwnership(ctx context.Context, owns []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	mapped := make([]azeventhubs.Ownership, len(owns))
	for i, o := range owns {
		o.FullyQualifiedNamespace = a.in(o.FullyQualifiedNamespace)
		mapped[i] = o
	}
	got, err := a.store.ClaimOwnership(ctx, mapped, opts)
	for i := range got {
		got[i].FullyQualifiedNamespace = a.out(got[i].FullyQualifiedNamespace)
	}
	return got, err
}

func (a *namespaceAlias) ListOwnership(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	got, err := a.store.ListOwnership(ctx, a.in(ns), hub, cg, opts)
	for i := range got {
		got[i].FullyQualifiedNamespace = a.out(got[i].FullyQualifiedNamespace)
	}
	return got, err
}

func (a *namespaceAlias) ListCheckpoints(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	got, err := a.store.ListCheckpoints(ctx, a.in(ns), hub, cg, opts)
	for i := range got {
		got[i].FullyQualifiedNamespace = a.out(got[i].FullyQualifiedNamespace)
	}
	return got, err
}

func (a *namespaceAlias) SetCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint, opts *azeventhubs.SetCheckpointOptions) error {
	cp.FullyQualifiedNamespace = a.in(cp.FullyQualifiedNamespace)
	return a.store.SetCheckpoint(ctx, cp, opts)
}
