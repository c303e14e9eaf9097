package checkpoint

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2/checkpoints"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/secret"
)

// BlobOptions configures [NewBlobStore]. Exactly one of Connection and
// AccountURL must be set, and Container always.
type BlobOptions struct {
	// Connection is a storage account connection string (for Azurite:
	// the well-known devstoreaccount1 string; the SDK does not read
	// UseDevelopmentStorage=true).
	Connection secret.String
	// AccountURL is the Blob endpoint, https://ACCOUNT.blob.core.windows.net,
	// used with Credential.
	AccountURL string
	// Credential authenticates to AccountURL. If nil,
	// azidentity.NewDefaultAzureCredential is used. Ignored with Connection.
	Credential azcore.TokenCredential
	// Container holds the checkpoint and ownership blobs; it is created when
	// missing.
	Container string
	// ClientOptions tune the blob client (retries, transport). If nil, the
	// SDK's defaults apply, but for two: the transport dials through
	// package netdial (keepalives and TCP user timeout, so that a
	// half-open connection is closed in seconds), and each HTTP try is
	// bounded by TryTimeout. A Transport or TryTimeout set here is kept.
	ClientOptions *container.ClientOptions
	// TryTimeout bounds each HTTP try of the blob client (the SDK retries
	// a try that timed out): a store that stopped answering fails a call
	// in seconds, in time for a lease renewal to be tried again before
	// the lease expires. If zero, DefaultBlobTryTimeout.
	TryTimeout time.Duration
	// Logger receives an info log when the container is created. If nil,
	// logs are discarded.
	Logger *slog.Logger
	// OnRequest, when set, is called with the operation of every request
	// the store sends, retries included: the requests Blob Storage bills.
	// The operations are "list", "set_metadata" (a lease claimed or
	// renewed, a checkpoint written), "upload" (a first lease or
	// checkpoint), "get" (a lease read), "delete", "container" and
	// "other".
	OnRequest func(op string)
}

// defaultBlobTryTimeout is BlobOptions.TryTimeout when zero: far above the
// time a checkpoint or ownership blob takes to write, far below the
// ownership expiration.
const defaultBlobTryTimeout = 5 * time.Second

// BlobStore is the SDK's checkpoints.BlobStore (the blob layout and
// metadata every Azure SDK reads) with ehsink's checks: SetCheckpoint
// refuses a checkpoint the SDK could not list back, and migrations by
// [Lowercase] never overwrite a newer checkpoint. Names are used as given;
// wrap the store with [Lowercase] for the names the other SDKs use. It is
// safe for concurrent use.
type BlobStore struct {
	*checkpoints.BlobStore
	cc        *container.Client
	container string
}

// NewBlobStore connects to the container, creates it when missing and
// returns the store. ctx bounds the call (the container check) only.
func NewBlobStore(ctx context.Context, opts BlobOptions) (*BlobStore, error) {
	if opts.Container == "" {
		return nil, errors.New("checkpoint: blob store: container is required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var (
		cc  *container.Client
		err error
	)
	var co container.ClientOptions
	if opts.ClientOptions != nil {
		co = *opts.ClientOptions
	}
	if co.Transport == nil {
		co.Transport = netdial.HTTPClient()
	}
	if co.Retry.TryTimeout == 0 {
		co.Retry.TryTimeout = cmp.Or(opts.TryTimeout, defaultBlobTryTimeout)
	}
	if opts.OnRequest != nil {
		co.PerRetryPolicies = append(slices.Clip(co.PerRetryPolicies), requestCounter(opts.OnRequest))
	}
	opts.ClientOptions = &co
	// One builder and one check for every Blob container ehsink reaches
	// (validate runs the same check); its errors never quote the key.
	if cc, err = connstr.BlobContainer(opts.Connection.Reveal(), opts.AccountURL, opts.Container, opts.Credential, opts.ClientOptions); err != nil {
		return nil, fmt.Errorf("checkpoint: blob container %s: %w", opts.Container, err)
	}

	_, err = cc.Create(ctx, nil)
	switch {
	case err == nil:
		log.Info("created checkpoint container", "container", opts.Container)
	case bloberror.HasCode(err, bloberror.ContainerAlreadyExists):
	default:
		return nil, fmt.Errorf("checkpoint: blob container %s: create: %w", opts.Container, err)
	}

	inner, err := checkpoints.NewBlobStore(cc, nil)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: blob container %s: %w", opts.Container, err)
	}
	return &BlobStore{BlobStore: inner, cc: cc, container: opts.Container}, nil
}

// Container returns the client of the store's container, for tools that
// inspect the blobs.
func (s *BlobStore) Container() *container.Client { return s.cc }

// SetCheckpoint writes the checkpoint through the SDK's store after checking
// it has both a sequence number and an offset.
func (s *BlobStore) SetCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint, options *azeventhubs.SetCheckpointOptions) error {
	if err := validCheckpoint(cp); err != nil {
		return err
	}
	if err := s.BlobStore.SetCheckpoint(ctx, cp, options); err != nil {
		return fmt.Errorf("checkpoint: blob container %s partition %s: %w", s.container, cp.PartitionID, err)
	}
	return nil
}

// createCheckpoint writes cp only if its blob does not exist yet
// (If-None-Match: *) and reports whether it did. The SDK's store has no
// conditional checkpoint write, so the name and metadata are built here the
// way the SDK builds them.
func (s *BlobStore) createCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint) (bool, error) {
	if err := validCheckpoint(cp); err != nil {
		return false, err
	}
	name := fmt.Sprintf("%s/%s/%s/checkpoint/%s", cp.FullyQualifiedNamespace, cp.EventHubName, cp.ConsumerGroup, cp.PartitionID)
	seq := strconv.FormatInt(*cp.SequenceNumber, 10)
	anyETag := azcore.ETag("*")
	_, err := s.cc.NewBlockBlobClient(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(nil)), &blockblob.UploadOptions{
		Metadata: map[string]*string{"sequencenumber": &seq, "offset": cp.Offset},
		AccessConditions: &blob.AccessConditions{
			ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &anyETag},
		},
	})
	switch {
	case err == nil:
		return true, nil
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return false, nil
	default:
		return false, fmt.Errorf("checkpoint: blob %s/%s: %w", s.container, name, err)
	}
}
