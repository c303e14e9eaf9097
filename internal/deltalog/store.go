package deltalog

import (
	"context"
	"errors"
	"io/fs"
	"time"
)

// Store holds a table's files: the log under _delta_log/ and the data
// files. Names are slash-separated paths relative to the table's root. A
// Store is safe for concurrent use.
type Store interface {
	// List returns the files whose names start with prefix, sorted by
	// name.
	List(ctx context.Context, prefix string) ([]File, error)
	// Read returns a file whole; a missing one is an error matching
	// fs.ErrNotExist.
	Read(ctx context.Context, name string) ([]byte, error)
	// Create writes name with body only if name does not exist, atomically
	// (readers see all of body or no file) and durably; it returns an
	// error matching ErrExists when name existed. This is the commit's
	// mutual exclusion ("writers must ... fail if the file exists").
	Create(ctx context.Context, name string, body []byte) error
	// Put writes name with body, atomically and durably, replacing any
	// file of that name (data files under fresh names, checkpoints,
	// _last_checkpoint).
	Put(ctx context.Context, name string, body []byte) error
	// Remove deletes name; a missing one is not an error.
	Remove(ctx context.Context, name string) error
	// String describes the store, without secrets.
	String() string
}

// File is a file found by Store.List.
type File struct {
	Name    string
	Size    int64
	ModTime time.Time
}

// ErrExists is matched by Store.Create's error when the name existed.
var ErrExists = errors.New("file exists")

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
