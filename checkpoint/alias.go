package checkpoint

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// AliasNamespace wraps store so that the state of namespace actual is kept
// under the name stored, and handed back under actual. The in-process
// emulator needs it: the SDK names a namespace after host:port, and the
// emulator's port changes every run. It is safe for concurrent use if store is.
func AliasNamespace(store azeventhubs.CheckpointStore, actual, stored string) azeventhubs.CheckpointStore {
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
