package deltalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/ehsink/ehsink/sinks"
)

// BlobStore is a table in a folder of an Azure Blob (or ADLS Gen2)
// container. A blob upload is atomic, so readers see a file whole or not
// at all; Create uploads with If-None-Match: *, which the service refuses
// when the blob exists.
type BlobStore struct {
	client *container.Client
	prefix string // the table's folder, "" or ending in /
	desc   string
}

// NewBlobStore returns the store of the table in folder dir of the
// container client names. The container must exist.
func NewBlobStore(client *container.Client, containerName, dir string) *BlobStore {
	dir = strings.Trim(dir, "/")
	s := &BlobStore{client: client, desc: "blob container " + containerName}
	if dir != "" {
		s.prefix = dir + "/"
		s.desc += " folder " + dir
	}
	return s
}

func (s *BlobStore) String() string { return s.desc }

// List lists the blobs under prefix; the service returns them sorted.
func (s *BlobStore) List(ctx context.Context, prefix string) ([]File, error) {
	full := s.prefix + prefix
	var out []File
	pager := s.client.NewListBlobsFlatPager(&container.ListBlobsFlatOptions{Prefix: &full})
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: list %s: %w", s, prefix, transient(err))
		}
		for _, b := range page.Segment.BlobItems {
			if b.Name == nil {
				continue
			}
			f := File{Name: strings.TrimPrefix(*b.Name, s.prefix)}
			if p := b.Properties; p != nil {
				if p.ContentLength != nil {
					f.Size = *p.ContentLength
				}
				if p.LastModified != nil {
					f.ModTime = *p.LastModified
				}
			}
			out = append(out, f)
		}
	}
	return out, nil
}

// Read downloads a blob.
func (s *BlobStore) Read(ctx context.Context, name string) ([]byte, error) {
	resp, err := s.client.NewBlobClient(s.prefix+name).DownloadStream(ctx, nil)
	if err != nil {
		if bloberror.HasCode(err, bloberror.BlobNotFound) {
			return nil, fmt.Errorf("%s: read %s: %w", s, name, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("%s: read %s: %w", s, name, transient(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read %s: %w", s, name, sinks.Transient(err))
	}
	return b, nil
}

// Create uploads with If-None-Match: *. Azure answers 412
// (ConditionNotMet) when the blob exists, Azurite 409
// (BlobAlreadyExists): both mean another writer created it.
func (s *BlobStore) Create(ctx context.Context, name string, body []byte) error {
	any := azcore.ETagAny
	cond := &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfNoneMatch: &any}}
	_, err := s.client.NewBlockBlobClient(s.prefix+name).UploadBuffer(ctx, body, &blockblob.UploadBufferOptions{AccessConditions: cond})
	switch {
	case err == nil:
		return nil
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return fmt.Errorf("%s: create %s: %w", s, name, ErrExists)
	}
	return fmt.Errorf("%s: create %s: %w", s, name, transient(err))
}

// Put uploads a blob, replacing any of that name.
func (s *BlobStore) Put(ctx context.Context, name string, body []byte) error {
	if _, err := s.client.NewBlockBlobClient(s.prefix+name).UploadBuffer(ctx, body, nil); err != nil {
		return fmt.Errorf("%s: put %s: %w", s, name, transient(err))
	}
	return nil
}

// Remove deletes a blob.
func (s *BlobStore) Remove(ctx context.Context, name string) error {
	_, err := s.client.NewBlobClient(s.prefix+name).Delete(ctx, nil)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
		return fmt.Errorf("%s: remove %s: %w", s, name, transient(err))
	}
	return nil
}

// transient marks errors worth retrying: all but a 4xx answer of the
// service (bad request, auth, conflict), where 408 and 429 are worth
// retrying too.
func transient(err error) error {
	var re *azcore.ResponseError
	if errors.As(err, &re) && re.StatusCode >= 400 && re.StatusCode < 500 &&
		re.StatusCode != http.StatusRequestTimeout && re.StatusCode != http.StatusTooManyRequests {
		return err
	}
	return sinks.Transient(err)
}
