package parquet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
)

// store is where a sink's files go: a local directory or a Blob container.
// Names are slash-separated paths relative to the store's root. A store is
// safe for concurrent use; each pending object is used by one goroutine.
type store interface {
	// create starts an object that stays invisible to readers until it is
	// committed. dir is the folder of its final name (a local temporary file
	// lives there so that the rename is atomic); tag names the owner
	// (connector and partition) so stray temporaries can be found again.
	create(ctx context.Context, dir, tag string) (pending, error)
	// list returns the committed objects whose names start with prefix.
	list(ctx context.Context, prefix string) ([]object, error)
	// remove deletes a committed object; a missing one is not an error.
	remove(ctx context.Context, name string) error
	// readTail returns the last n bytes of an object of the given size.
	readTail(ctx context.Context, name string, size, n int64) ([]byte, error)
	// cleanTemps removes the temporaries with tag under prefix that an
	// earlier writer left behind (a crash before commit), and returns how
	// many it removed.
	cleanTemps(ctx context.Context, prefix, tag string) (int, error)
	// String describes the store for errors and logs, without secrets.
	String() string
}

// object is a committed object found by list.
type object struct {
	name string
	size int64
}

// pending is an object being written. Its bytes are invisible until commit
// makes them visible, atomically, under their final name.
type pending interface {
	io.Writer
	// commit makes the object visible under name. It may be called again
	// after a failure. A committed object replaces one of the same name,
	// which makes a replayed commit idempotent.
	commit(ctx context.Context, name string) error
	// abort discards the object. It is safe after commit (then it does
	// nothing) and may be called more than once.
	abort() error
}

// randomHex returns n random bytes in hex, for temporary names and block IDs.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
