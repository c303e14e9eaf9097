package parquet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
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
	// claim creates the object name with body unless it exists, atomically
	// and exclusively (link(2) locally, If-None-Match: * on Blob). It
	// returns nil when it created it, and the existing body otherwise.
	claim(ctx context.Context, name string, body []byte) (existing []byte, err error)
	// read returns a committed object whole (a claim: small).
	read(ctx context.Context, name string) ([]byte, error)
	// publish makes visible under name the bytes an unfinished commit left
	// ready: ref is what the pending object's prepare returned. It is nil
	// when name is visible after the call, and errGone when the bytes are
	// gone and can never be published (the commit is abandoned).
	publish(ctx context.Context, ref, name string) error
	// String describes the store for errors and logs, without secrets.
	String() string
}

// errGone means the bytes of an unfinished commit no longer exist.
var errGone = errors.New("prepared object is gone")

// object is a committed object found by list.
type object struct {
	name string
	size int64
}

// pending is an object being written. Its bytes are invisible until commit
// makes them visible, atomically, under their final name.
type pending interface {
	io.Writer
	// prepare makes the bytes durable where commit publishes them from (a
	// fsynced temporary file, staged blocks) and returns a reference with
	// which store.publish can publish them too, should this writer die
	// after claiming the commit. No Write may follow.
	prepare(ctx context.Context, name string) (ref string, err error)
	// commit makes the prepared object visible under name, exclusively: a
	// name that is already visible was published from the same claim (a
	// retry, or a recovering writer rolling the commit forward), so commit
	// then succeeds without replacing it. It may be called again after a
	// failure.
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
