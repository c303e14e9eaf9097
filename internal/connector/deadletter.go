package connector

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// FileDeadLetters stores dead letters as JSON lines, one file per partition
// (`<dir>/<partition>.jsonl`), each line fsynced before Store returns. A
// crash between Store and the sink's commit stores a letter again on replay:
// dead letters are at-least-once, data stays exactly-once. It is safe for
// concurrent use.
type FileDeadLetters struct {
	dir string
	mu  sync.Mutex // serialises appends to one directory
}

// NewFileDeadLetters returns a store writing under dir, created if missing.
func NewFileDeadLetters(dir string) (*FileDeadLetters, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("dead letters: %w", err)
	}
	return &FileDeadLetters{dir: dir}, nil
}

// Store implements DeadLetterStore.
func (d *FileDeadLetters) Store(_ context.Context, partition string, letters []sinks.DeadLetter) error {
	var buf []byte
	for i := range letters {
		buf = record.AppendDeadLetter(buf, &letters[i])
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	path := filepath.Join(d.dir, partitionFileName(partition)+".jsonl")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	if _, err := f.Write(buf); err != nil {
		f.Close()
		return fmt.Errorf("dead letters: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("dead letters: sync %s: %w", path, err)
	}
	return f.Close()
}

// partitionFileName keeps a partition ID from escaping the directory.
func partitionFileName(id string) string {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return "partition-" + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	return id
}
