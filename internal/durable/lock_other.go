//go:build !unix

package durable

import (
	"fmt"
	"runtime"
)

// Lock is not implemented off Unix: it returns an error matching ErrNoLock,
// and callers that need exclusion across processes refuse to go on.
func Lock(path string) (func(), error) {
	return nil, fmt.Errorf("lock %s: %w (flock(2) is not available on %s)", path, ErrNoLock, runtime.GOOS)
}
