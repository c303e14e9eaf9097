package connector

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

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

// deadLetterLine is one line of a dead-letter file.
type deadLetterLine struct {
	Partition      string          `json:"partition"`
	SequenceNumber int64           `json:"sequence_number"`
	Offset         string          `json:"offset"`
	EnqueuedTime   time.Time       `json:"enqueued_time"`
	PartitionKey   *string         `json:"partition_key,omitempty"`
	Properties     map[string]any  `json:"properties,omitempty"`
	Body           json.RawMessage `json:"body,omitempty"`
	BodyBase64     string          `json:"body_base64,omitempty"`
	Reason         string          `json:"reason"`
	FailedAt       time.Time       `json:"failed_at"`
}

// Store implements DeadLetterStore.
func (d *FileDeadLetters) Store(_ context.Context, partition string, letters []sinks.DeadLetter) error {
	var buf []byte
	for _, l := range letters {
		line := deadLetterLine{
			Partition:      l.Event.Partition,
			SequenceNumber: l.Event.SequenceNumber,
			Offset:         l.Event.Offset,
			EnqueuedTime:   l.Event.EnqueuedTime.UTC(),
			PartitionKey:   l.Event.PartitionKey,
			Properties:     l.Event.Properties,
			Reason:         l.Reason,
			FailedAt:       l.FailedAt.UTC(),
		}
		if json.Valid(l.Event.Body) {
			line.Body = l.Event.Body
		} else {
			line.BodyBase64 = base64.StdEncoding.EncodeToString(l.Event.Body)
		}
		b, err := json.Marshal(line)
		if err != nil {
			line.Properties = nil // a property JSON cannot hold must not lose the letter
			if b, err = json.Marshal(line); err != nil {
				return fmt.Errorf("dead letter seq %d: encode: %w", l.Event.SequenceNumber, err)
			}
		}
		buf = append(append(buf, b...), '\n')
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
