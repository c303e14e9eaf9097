//go:build unix

package durable

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Lock takes an exclusive flock(2) on path, creating it if missing, and
// returns the function that releases it. flock locks belong to the open file
// description, so two goroutines of one process exclude each other as two
// processes do. The wait is not cancellable; the lock is held only for one
// read-compare-write.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		// Closing the descriptor releases the lock.
		_ = f.Close()
	}, nil
}
