package parquet

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/sinks"
)

// blobStore keeps files in an Azure Blob container. A file is spooled to a
// local temporary file while it is written, then uploaded as staged blocks
// and made visible by one CommitBlockList with If-None-Match: *: readers
// see the whole blob or nothing, and a name is published once.
//
// Why spool instead of staging blocks as row groups fill: staged blocks
// belong to one blob name, and the name holds the file's last sequence
// number, known only at Flush. The spool keeps memory bounded (one block in
// flight) at the cost of local disk of up to max_bytes per open partition.
type blobStore struct {
	client    *container.Client
	container string
	spoolDir  string
	blockSize int
}

// defaultBlockSize is the size of the staged blocks: large enough that a
// 256 MiB file is 64 requests, small enough to hold one in memory per commit.
const defaultBlockSize = 4 << 20

func newBlobStore(ctx context.Context, client *container.Client, name, spoolDir string) (*blobStore, error) {
	s := &blobStore{client: client, container: name, spoolDir: spoolDir, blockSize: defaultBlockSize}
	if _, err := client.Create(ctx, nil); err != nil && !bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
		return nil, fmt.Errorf("%s: create: %w", s, transientIfNetwork(err))
	}
	if err := os.MkdirAll(spoolDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: spool dir %q: %w", s, spoolDir, err)
	}
	return s, nil
}

// newBlobClient builds the container client from a storage connection
// string or, with Entra ID, the account's URL.
func newBlobClient(c *blobConfig) (*container.Client, error) {
	// The transport closes a half-open connection in seconds (package
	// netdial); the writer's calls carry the runner's deadline.
	opts := &container.ClientOptions{}
	opts.Transport = netdial.HTTPClient()
	// The one parser validate runs too; its errors never quote the key.
	cc, err := connstr.BlobContainer(c.Connection.Reveal(), c.AccountURL, c.Container, nil, opts)
	if err != nil {
		return nil, fmt.Errorf("blob.%w", err)
	}
	return cc, nil
}

func (s *blobStore) String() string { return "blob container " + s.container }

const spoolSuffix = ".spool"

func (s *blobStore) create(_ context.Context, _ string, tag string) (pending, error) {
	f, err := os.CreateTemp(s.spoolDir, tag+"-*"+spoolSuffix)
	if err != nil {
		return nil, fmt.Errorf("%s: create spool file in %q: %w", s, s.spoolDir, err)
	}
	return &blobPending{store: s, f: f}, nil
}

func (s *blobStore) list(ctx context.Context, prefix string) ([]object, error) {
	var out []object
	pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &prefix})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list %q: %w", s, prefix, transientIfNetwork(err))
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			var size int64
			if b.Properties != nil && b.Properties.ContentLength != nil {
				size = *b.Properties.ContentLength
			}
			out = append(out, object{name: *b.Name, size: size})
		}
	}
	return out, nil
}

func (s *blobStore) remove(ctx context.Context, name string) error {
	_, err := s.client.NewBlobClient(name).Delete(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return fmt.Errorf("%s: delete %q: %w", s, name, transientIfNetwork(err))
	}
	return nil
}

func (s *blobStore) readTail(ctx context.Context, name string, size, n int64) ([]byte, error) {
	n = min(n, size)
	return s.download(ctx, name, &blob.DownloadStreamOptions{Range: blob.HTTPRange{Offset: size - n, Count: n}})
}

// download reads a blob, or the range opts ask for.
func (s *blobStore) download(ctx context.Context, name string, opts *blob.DownloadStreamOptions) ([]byte, error) {
	resp, err := s.client.NewBlobClient(name).DownloadStream(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: read %q: %w", s, name, transientIfNetwork(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read %q: %w", s, name, transientIfNetwork(err))
	}
	return b, nil
}

// cleanTemps removes spool files of the tag. Blocks staged by a commit that
// crashed stay uncommitted on their blob: invisible to readers, dropped by
// the next commit of that name, and garbage-collected by the service after
// a week.
func (s *blobStore) cleanTemps(_ context.Context, _ string, tag string) (int, error) {
	entries, err := os.ReadDir(s.spoolDir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, fmt.Errorf("%s: spool dir %q: %w", s, s.spoolDir, err)
	}
	removed := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tag+"-") || !strings.HasSuffix(e.Name(), spoolSuffix) {
			continue
		}
		if err := os.Remove(filepath.Join(s.spoolDir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, fmt.Errorf("%s: remove spool file: %w", s, err)
		}
		removed++
	}
	return removed, nil
}

// blobPending is a spooled file waiting for its upload.
type blobPending struct {
	store     *blobStore
	f         *os.File // nil once aborted or committed
	ids       []string // staged blocks, once prepared
	staged    string   // the name they were staged under
	committed bool
}

func (p *blobPending) Write(b []byte) (int, error) {
	if p.f == nil {
		return 0, fmt.Errorf("%s: write to a closed spool file", p.store)
	}
	return p.f.Write(b)
}

// prepare uploads the spool as staged blocks of name, invisible until a
// CommitBlockList, and returns their IDs.
func (p *blobPending) prepare(ctx context.Context, name string) (string, error) {
	if p.ids != nil && p.staged == name {
		return strings.Join(p.ids, ","), nil
	}
	if p.f == nil {
		return "", fmt.Errorf("%s: commit %q: spool file already discarded", p.store, name)
	}
	if _, err := p.f.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("%s: commit %q: rewind spool: %w", p.store, name, err)
	}
	bb := p.store.client.NewBlockBlobClient(name)
	// Fresh block IDs on every attempt: a retried commit never mixes blocks
	// with an earlier attempt. IDs of one blob must have the same length.
	attempt := randomHex(8)
	var ids []string
	buf := make([]byte, p.store.blockSize)
	for {
		n, err := io.ReadFull(p.f, buf)
		if n > 0 {
			id := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%s-%08d", attempt, len(ids)))
			if _, serr := bb.StageBlock(ctx, id, streaming.NopCloser(bytes.NewReader(buf[:n])), nil); serr != nil {
				return "", fmt.Errorf("%s: stage block %d of %q: %w", p.store, len(ids), name, transientIfNetwork(serr))
			}
			ids = append(ids, id)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: read spool of %q: %w", p.store, name, err)
		}
	}
	p.ids, p.staged = ids, name
	return strings.Join(ids, ","), nil
}

func (p *blobPending) commit(ctx context.Context, name string) error {
	if p.committed {
		return nil
	}
	ref, err := p.prepare(ctx, name)
	if err != nil {
		return err
	}
	if err := p.store.publish(ctx, ref, name); err != nil {
		return err
	}
	p.committed = true
	_ = p.discardSpool()
	return nil
}

// ifNoneExists makes a write fail when the blob exists.
func ifNoneExists() *blob.AccessConditions {
	anyTag := azcore.ETagAny
	return &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &anyTag}}
}

// exists reports whether err says the blob was already there.
func exists(err error) bool {
	return bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet)
}

// publish commits the staged blocks ref (comma-separated IDs) as name,
// only if name does not exist yet: If-None-Match: *.
func (s *blobStore) publish(ctx context.Context, ref, name string) error {
	var ids []string
	if ref != "" {
		ids = strings.Split(ref, ",")
	}
	_, err := s.client.NewBlockBlobClient(name).CommitBlockList(ctx, ids, &blockblob.CommitBlockListOptions{AccessConditions: ifNoneExists()})
	switch {
	case err == nil, exists(err):
		return nil
	case bloberror.HasCode(err, bloberror.InvalidBlockList):
		return fmt.Errorf("%s: commit block list of %q: %w", s, name, errGone)
	}
	return fmt.Errorf("%s: commit block list of %q: %w", s, name, transientIfNetwork(err))
}

func (s *blobStore) claim(ctx context.Context, name string, body []byte) ([]byte, error) {
	_, err := s.client.NewBlockBlobClient(name).UploadBuffer(ctx, body, &blockblob.UploadBufferOptions{AccessConditions: ifNoneExists()})
	switch {
	case err == nil:
		return nil, nil
	case exists(err):
		return s.read(ctx, name)
	}
	return nil, fmt.Errorf("%s: claim %q: %w", s, name, transientIfNetwork(err))
}

func (s *blobStore) read(ctx context.Context, name string) ([]byte, error) {
	return s.download(ctx, name, nil)
}

func (p *blobPending) discardSpool() error {
	if p.f == nil {
		return nil
	}
	name := p.f.Name()
	_ = p.f.Close()
	p.f = nil
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: remove spool file: %w", p.store, err)
	}
	return nil
}

func (p *blobPending) abort() error { return p.discardSpool() }

// transientIfNetwork marks errors worth retrying: all but a 4xx answer
// from the service (bad request, auth, conflict), where 408 and 429 are
// worth retrying too.
func transientIfNetwork(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 &&
		re.StatusCode != http.StatusRequestTimeout && re.StatusCode != http.StatusTooManyRequests {
		return err
	}
	return sinks.Transient(err)
}
