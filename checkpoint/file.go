package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/internal/durable"
)

// FileStoreOptions configures a [FileStore]. The zero value (or nil) is valid.
type FileStoreOptions struct {
	// Logger receives debug logs of ownership claims won and lost. If nil,
	// logs are discarded.
	Logger *slog.Logger
}

// FileStore is an [azeventhubs.CheckpointStore] on a local directory, laid
// out like the SDK's blob store:
//
//	DIR/{namespace}/{eventhub}/{consumergroup}/checkpoint/{partition}
//	DIR/{namespace}/{eventhub}/{consumergroup}/ownership/{partition}
//
// Names are used as given, like the SDK's blob store; wrap the store with
// [Lowercase] for the layout the other Azure SDKs use. Each file holds one
// JSON object (see [fileCheckpoint] and [fileOwnership]). Files are replaced
// atomically (temporary file, fsync, rename, fsync of the directory), so a
// reader sees either the old or the new content and a crash loses at most
// the write in progress. Names starting with "." in those directories are
// the store's lock and temporary files.
//
// Ownership claims are compare-and-swap on the ETag, with the semantics of
// checkpoints.BlobStore: a claim without an ETag creates the ownership only
// if none exists, a claim with an ETag succeeds only if it matches the
// current one, and a claim that loses is left out of the result without an
// error. Each read-compare-write holds an exclusive flock(2) on a lock file
// of its partition, so claims are correct across goroutines and across
// processes sharing the directory on one machine (not across machines on a
// network file system).
//
// A FileStore is safe for concurrent use.
type FileStore struct {
	dir string
	log *slog.Logger
	now func() time.Time // seam for tests; time.Now otherwise
}

// fileCheckpoint is the content of a checkpoint file. The keys are the blob
// metadata keys of the SDK's blob store.
type fileCheckpoint struct {
	// SequenceNumber of the last event processed.
	SequenceNumber int64 `json:"sequencenumber"`
	// Offset of the last event processed.
	Offset string `json:"offset"`
}

// fileOwnership is the content of an ownership file.
type fileOwnership struct {
	// OwnerID is the processor owning the partition; empty when relinquished.
	OwnerID string `json:"ownerid"`
	// ETag changes on every successful claim.
	ETag string `json:"etag"`
	// LastModified is when the ownership was last claimed, set by the store.
	LastModified time.Time `json:"lastmodified"`
}

// NewFileStore returns a store rooted at dir, creating dir if missing.
func NewFileStore(dir string, opts *FileStoreOptions) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("checkpoint: file store: directory is required")
	}
	if opts == nil {
		opts = &FileStoreOptions{}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: file store %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("checkpoint: file store %s: %w", abs, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FileStore{dir: abs, log: log, now: time.Now}, nil
}

// Dir returns the store's absolute root directory.
func (s *FileStore) Dir() string { return s.dir }

// ClaimOwnership claims each ownership in partitionOwnership with
// compare-and-swap on its ETag and returns the claims that won, with their
// new ETag and LastModifiedTime. A claim with an ETag for a partition that
// has no ownership file loses (the SDK's blob store returns an error there;
// losing is what it means). ctx is checked between claims; a claim in
// progress runs to its end.
func (s *FileStore) ClaimOwnership(ctx context.Context, partitionOwnership []azeventhubs.Ownership, _ *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	var won []azeventhubs.Ownership
	for _, po := range partitionOwnership {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		o, ok, err := s.claim(po)
		if err != nil {
			return nil, err
		}
		if !ok {
			s.log.Debug("ownership claim lost", "partition", po.PartitionID, "owner", po.OwnerID)
			continue
		}
		s.log.Debug("ownership claimed", "partition", po.PartitionID, "owner", po.OwnerID)
		won = append(won, o)
	}
	return won, nil
}

func (s *FileStore) claim(po azeventhubs.Ownership) (azeventhubs.Ownership, bool, error) {
	dir, err := s.groupDir(po.FullyQualifiedNamespace, po.EventHubName, po.ConsumerGroup, "ownership")
	if err != nil {
		return po, false, err
	}
	if err := checkName("partition", po.PartitionID); err != nil {
		return po, false, err
	}
	if err := s.ensureDir(dir); err != nil {
		return po, false, fmt.Errorf("checkpoint: ownership of partition %s: %w", po.PartitionID, err)
	}
	unlock, err := durable.Lock(filepath.Join(dir, "."+po.PartitionID+".lock"))
	if err != nil {
		return po, false, fmt.Errorf("checkpoint: ownership of partition %s: %w", po.PartitionID, err)
	}
	defer unlock()

	path := filepath.Join(dir, po.PartitionID)
	var cur fileOwnership
	err = readJSON(path, &cur)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return po, false, fmt.Errorf("checkpoint: ownership of partition %s: %w", po.PartitionID, err)
	}
	switch {
	case po.ETag == nil && exists: // created by someone else first
		return po, false, nil
	case po.ETag != nil && (!exists || cur.ETag != string(*po.ETag)): // changed since it was read
		return po, false, nil
	}
	next := fileOwnership{
		OwnerID:      po.OwnerID,
		ETag:         rand.Text(),
		LastModified: s.now().UTC(),
	}
	if err := writeJSONAtomic(path, next); err != nil {
		return po, false, fmt.Errorf("checkpoint: ownership of partition %s: %w", po.PartitionID, err)
	}
	etag := azcore.ETag(next.ETag)
	po.ETag = &etag
	po.LastModifiedTime = next.LastModified
	return po, true, nil
}

// ListOwnership lists the ownership of every partition that has one.
func (s *FileStore) ListOwnership(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, _ *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	dir, err := s.groupDir(fullyQualifiedNamespace, eventHubName, consumerGroup, "ownership")
	if err != nil {
		return nil, err
	}
	ids, err := listPartitions(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list ownership: %w", err)
	}
	var out []azeventhubs.Ownership
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var fo fileOwnership
		if err := readJSON(filepath.Join(dir, id), &fo); err != nil {
			return nil, fmt.Errorf("checkpoint: ownership of partition %s: %w", id, err)
		}
		etag := azcore.ETag(fo.ETag)
		out = append(out, azeventhubs.Ownership{
			ConsumerGroup:           consumerGroup,
			EventHubName:            eventHubName,
			FullyQualifiedNamespace: fullyQualifiedNamespace,
			PartitionID:             id,
			OwnerID:                 fo.OwnerID,
			LastModifiedTime:        fo.LastModified,
			ETag:                    &etag,
		})
	}
	return out, nil
}

// ListCheckpoints lists the checkpoint of every partition that has one.
func (s *FileStore) ListCheckpoints(ctx context.Context, fullyQualifiedNamespace, eventHubName, consumerGroup string, _ *azeventhubs.ListCheckpointsOptions) ([]azeventhubs.Checkpoint, error) {
	dir, err := s.groupDir(fullyQualifiedNamespace, eventHubName, consumerGroup, "checkpoint")
	if err != nil {
		return nil, err
	}
	ids, err := listPartitions(dir)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: list checkpoints: %w", err)
	}
	var out []azeventhubs.Checkpoint
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var fc fileCheckpoint
		if err := readJSON(filepath.Join(dir, id), &fc); err != nil {
			return nil, fmt.Errorf("checkpoint: checkpoint of partition %s: %w", id, err)
		}
		out = append(out, azeventhubs.Checkpoint{
			ConsumerGroup:           consumerGroup,
			EventHubName:            eventHubName,
			FullyQualifiedNamespace: fullyQualifiedNamespace,
			PartitionID:             id,
			SequenceNumber:          &fc.SequenceNumber,
			Offset:                  &fc.Offset,
		})
	}
	return out, nil
}

// SetCheckpoint replaces the checkpoint of one partition. Like the SDK's
// blob store it does not check ownership: the caller is assumed to own the
// partition. The checkpoint must have a sequence number and an offset.
func (s *FileStore) SetCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint, _ *azeventhubs.SetCheckpointOptions) error {
	path, fc, err := s.checkpointFile(ctx, cp)
	if err != nil {
		return err
	}
	if err := writeJSONAtomic(path, fc); err != nil {
		return fmt.Errorf("checkpoint: checkpoint of partition %s: %w", cp.PartitionID, err)
	}
	return nil
}

// createCheckpoint writes cp only if the partition has no checkpoint yet and
// reports whether it did. It is atomic across processes (link(2) fails on an
// existing name), so a migration never overwrites a newer checkpoint.
func (s *FileStore) createCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint) (bool, error) {
	path, fc, err := s.checkpointFile(ctx, cp)
	if err != nil {
		return false, err
	}
	created, err := createJSON(path, fc)
	if err != nil {
		return false, fmt.Errorf("checkpoint: checkpoint of partition %s: %w", cp.PartitionID, err)
	}
	return created, nil
}

func (s *FileStore) checkpointFile(ctx context.Context, cp azeventhubs.Checkpoint) (string, fileCheckpoint, error) {
	if err := ctx.Err(); err != nil {
		return "", fileCheckpoint{}, err
	}
	if err := validCheckpoint(cp); err != nil {
		return "", fileCheckpoint{}, err
	}
	dir, err := s.groupDir(cp.FullyQualifiedNamespace, cp.EventHubName, cp.ConsumerGroup, "checkpoint")
	if err != nil {
		return "", fileCheckpoint{}, err
	}
	if err := s.ensureDir(dir); err != nil {
		return "", fileCheckpoint{}, fmt.Errorf("checkpoint: checkpoint of partition %s: %w", cp.PartitionID, err)
	}
	return filepath.Join(dir, cp.PartitionID), fileCheckpoint{SequenceNumber: *cp.SequenceNumber, Offset: *cp.Offset}, nil
}

// validCheckpoint rejects checkpoints the SDK's blob store could not list
// back (it requires both metadata keys), so that every store accepts the same
// checkpoints.
func validCheckpoint(cp azeventhubs.Checkpoint) error {
	if err := checkName("partition", cp.PartitionID); err != nil {
		return err
	}
	if cp.SequenceNumber == nil || cp.Offset == nil {
		return fmt.Errorf("checkpoint: checkpoint of partition %s: %w", cp.PartitionID, errIncompleteCheckpoint)
	}
	return nil
}

// groupDir returns DIR/ns/eh/cg/kind after checking each name.
func (s *FileStore) groupDir(ns, eh, cg, kind string) (string, error) {
	for _, n := range [...]struct{ what, v string }{{"namespace", ns}, {"event hub", eh}, {"consumer group", cg}} {
		if err := checkName(n.what, n.v); err != nil {
			return "", err
		}
	}
	return filepath.Join(s.dir, ns, eh, cg, kind), nil
}

// ensureDir creates dir and makes the new directory entries durable, so
// that a checkpoint written into a fresh directory survives a crash.
func (s *FileStore) ensureDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for d := dir; d != s.dir && strings.HasPrefix(d, s.dir); d = filepath.Dir(d) {
		if err := durable.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// checkName keeps names from escaping their directory or colliding with the
// store's dot files.
func checkName(what, v string) error {
	if v == "" || v == "." || v == ".." || strings.HasPrefix(v, ".") || strings.ContainsAny(v, "/\\\x00") {
		return fmt.Errorf("checkpoint: %s %q: %w", what, v, errInvalidName)
	}
	return nil
}

// listPartitions returns the names of the regular files in dir, skipping the
// store's dot files; a missing dir has none.
func listPartitions(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		ids = append(ids, e.Name())
	}
	return ids, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("file %s: %w", path, err)
	}
	return nil
}

// writeJSONAtomic replaces path with v's JSON: temporary file in the same
// directory, fsync, rename over path, fsync the directory.
func writeJSONAtomic(path string, v any) error {
	tmp, err := writeTemp(path, v)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return durable.SyncDir(filepath.Dir(path))
}

// createJSON writes v's JSON to path only if path does not exist, and reports
// whether it did. The hard link is the atomic create-if-absent.
func createJSON(path string, v any) (bool, error) {
	tmp, err := writeTemp(path, v)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, durable.SyncDir(filepath.Dir(path))
}

func writeTemp(path string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("file %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
