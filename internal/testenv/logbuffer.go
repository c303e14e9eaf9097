package testenv

import (
	"bytes"
	"sync"
)

// LogBuffer is a log destination that the goroutines of the code under
// test write to while the test reads it.
type LogBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
