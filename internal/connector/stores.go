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
// ctx bounds the call only. onRequest, when set, is told the operation of
// every request a Blob store sends (what Blob Storage bills).
func NewCheckpointStore(ctx context.Context, spec CheckpointSpec, log *slog.Logger, onRequest func(op string)) (azeventhubs.CheckpointStore, error) {
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
			OnRequest:  onRequest,
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
