// Package durable holds what the packages that write files with atomic
// renames (checkpoint files, Parquet files, emulator segments) share: making
// a directory's entries durable after a create, rename or remove.
package durable

import (
	"fmt"
	"os"
)

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
