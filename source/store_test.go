package source

import (
	"context"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
)

// nopStore satisfies azeventhubs.CheckpointStore for option validation only.
type nopStore struct{}

func (nopStore) ClaimOwnership(context.Context, []azeventhubs.Ownership, *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return nil, nil
}
func (nopStore) ListCheckpoints(context.Context, string, string, string, *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	return nil, nil
}
func (nopStore) ListOwnership(context.Context, string, string, string, *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	return nil, nil
}
func (nopStore) SetCheckpoint(context.Context, azeventhubs.Checkpoint, *azeventhubs.SetCheckpointOptions) error {
	return nil
}
