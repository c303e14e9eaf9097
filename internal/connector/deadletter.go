package connector

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/durable"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// FileDeadLetters stores dead letters as JSON lines, one file per partition
// (`<dir>/<partition>.jsonl`), each line fsynced before Store returns.
//
// A replay (after a crash, a lost lease, a retried flush) starts after the
// sink's committed watermark and dead-letters again what an abandoned flush
// had stored. So Store reads the file back from its end to the last line at
// or below the watermark and skips each letter a line there already holds
// (the same sequence number and reason): a letter is stored once, also by
// several processes sharing the directory (they take the file's lock in
// turn). A stale owner whose letters interleave with the next owner's
// before its commit is refused can still leave one twice. A line torn by a
// crash mid-write was never acknowledged: Store cuts it off. It is safe
// for concurrent use.
type FileDeadLetters struct {
	dir string
	mu  sync.Mutex // serialises appends to one directory
}

// NewFileDeadLetters returns a store writing under dir. The directory is
// made by the first Store, not here: every connector gets a store, and
// one whose sink keeps its dead letters itself (postgres, parquet,
// iceberg) never writes to it, so it must leave no empty folder behind.
func NewFileDeadLetters(dir string) (*FileDeadLetters, error) {
	return &FileDeadLetters{dir: dir}, nil
}

// Store implements DeadLetterStore.
func (d *FileDeadLetters) Store(ctx context.Context, partition string, committed int64, letters []sinks.DeadLetter) error {
	rev := deadletters.Revision(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	// Made here, on the first letter, rather than by NewFileDeadLetters.
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	path := filepath.Join(d.dir, partitionFileName(partition)+".jsonl")
	// Where the system has no file lock, d.mu still serialises this
	// process's stores; processes sharing the directory may then repeat a
	// letter.
	unlock, err := durable.Lock(path)
	switch {
	case err == nil:
		defer unlock()
	case !errors.Is(err, durable.ErrNoLock):
		return fmt.Errorf("dead letters: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("dead letters: %w", err)
	}
	held, end, err := storedAfter(f, committed)
	if err == nil {
		err = f.Truncate(end) // a torn last line, if any
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("dead letters: %s: %w", path, err)
	}
	var buf []byte
	for i := range letters {
		if !held[letterKey{letters[i].Event.SequenceNumber, letters[i].Reason}] {
			buf = record.AppendDeadLetter(buf, &letters[i], rev)
		}
	}
	// Even with nothing to add the file is synced: a line that made a
	// letter skipped may not be durable yet (its writer died before its
	// sync).
	if _, err := f.WriteAt(buf, end); err != nil {
		f.Close()
		return fmt.Errorf("dead letters: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("dead letters: sync %s: %w", path, err)
	}
	return f.Close()
}

// letterKey is what makes two dead letters of a partition the same one.
type letterKey struct {
	seq    int64
	reason string
}

// storedAfter reads f back from its end and returns the letters of its
// complete lines after the last line at or below committed, and where its
// last complete line ends (what follows is torn). Unreadable lines are
// passed over.
func storedAfter(f *os.File, committed int64) (held map[letterKey]bool, end int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	held = map[letterKey]bool{}
	end = -1
	var carry []byte // a line whose start lies in an earlier part of the file
	for pos := st.Size(); pos > 0; {
		n := min(pos, 64<<10)
		pos -= n
		buf := make([]byte, n, n+int64(len(carry)))
		if _, err := f.ReadAt(buf, pos); err != nil {
			return nil, 0, err
		}
		buf = append(buf, carry...)
		if end < 0 {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				carry = buf
				continue
			}
			end = pos + int64(i) + 1
			buf = buf[:i+1]
		}
		// buf is whole lines, each ending in '\n', but for its first
		// when pos > 0
		for len(buf) > 0 {
			j := bytes.LastIndexByte(buf[:len(buf)-1], '\n')
			if j < 0 && pos > 0 {
				break
			}
			line := buf[j+1 : len(buf)-1]
			buf = buf[:j+1]
			var l struct {
				Seq    *int64 `json:"sequence_number"`
				Reason string `json:"reason"`
			}
			if json.Unmarshal(line, &l) != nil || l.Seq == nil {
				continue
			}
			if *l.Seq <= committed {
				return held, end, nil
			}
			held[letterKey{*l.Seq, l.Reason}] = true
		}
		carry = buf
	}
	return held, max(end, 0), nil
}

// partitionFileName keeps a partition ID from escaping the directory.
func partitionFileName(id string) string {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return "partition-" + base64.RawURLEncoding.EncodeToString([]byte(id))
	}
	return id
}
