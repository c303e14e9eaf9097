// Package durable holds what the packages that write files durably
// (checkpoint files, Parquet files, emulator segments, dead letters) share:
// making a directory's entries durable after a create, rename or remove,
// and a lock on a file that excludes other processes too.
package durable

import (
	"errors"
	"fmt"
	"os"
)

// ErrNoLock is matched by Lock's error where the system has no file lock.
var ErrNoLock = errors.New("no file lock on this system")

// SyncDir fsyncs the directory dir, so that entries created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("directory %s: sync: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("directory %s: sync: %w", dir, err)
	}
	return nil
}
