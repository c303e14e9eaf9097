//go:build !unix

package checkpoint

import (
	"fmt"
	"runtime"
)

// lockFile is not implemented off Unix: without an OS lock the file store
// could not make claims safe across processes, so it refuses them.
func lockFile(path string) (func(), error) {
	return nil, fmt.Errorf("lock %s: file store ownership needs flock(2), not available on %s", path, runtime.GOOS)
}
