package deadletters

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// ErrReplayUnsupported is returned by the Replay of a store that can be
// read but not replayed.
var ErrReplayUnsupported = errors.New("replay is not supported for this store")

// Files reads the dead-letter files of a connector whose sink does not keep
// its letters itself (errors.dead_letter.dir: one file of JSON lines per
// partition, written by the runner). It is read-only: an append-only file
// has nowhere to mark a letter replayed in the commit that writes its rows,
// so Replay returns ErrReplayUnsupported. A letter's ID is its place in the
// files, the partitions' files taken by name: stable, as the files are
// only appended to. A torn last line (a crash mid-write) is passed over.
type Files struct {
	// Dir is the folder of the files.
	Dir string
	// Connector names the connector the letters are reported under.
	Connector string
}

var _ Store = Files{}

// Letters implements Store.
func (f Files) Letters(ctx context.Context, flt Filter) ([]Letter, error) {
	entries, err := os.ReadDir(f.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter files: %w", err)
	}
	var out []Letter
	var id int64
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".jsonl" {
			continue
		}
		path := filepath.Join(f.Dir, e.Name())
		err := readLines(path, func(line []byte) error {
			id++
			if err := ctx.Err(); err != nil {
				return err
			}
			l, err := f.letter(id, line)
			if err != nil {
				return fmt.Errorf("line %d: %w", id, err)
			}
			if selects(flt, &l) {
				out = append(out, l)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("dead-letter file %s: %w", path, err)
		}
	}
	return out, nil
}

// readLines calls fn with each complete line of the file at path.
func readLines(path string, fn func(line []byte) error) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	r := bufio.NewReader(file)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil // what follows the last newline is torn, or nothing
		}
		if err != nil {
			return err
		}
		if err := fn(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			return err
		}
	}
}

// letter decodes one line of the files.
func (f Files) letter(id int64, line []byte) (Letter, error) {
	var r record.DeadLetter
	if err := json.Unmarshal(line, &r); err != nil {
		return Letter{}, err
	}
	body := []byte(r.Body)
	if r.BodyEncoding == "base64" {
		var s string
		if err := json.Unmarshal(r.Body, &s); err != nil {
			return Letter{}, fmt.Errorf("body: %w", err)
		}
		var err error
		if body, err = base64.StdEncoding.DecodeString(s); err != nil {
			return Letter{}, fmt.Errorf("body: %w", err)
		}
	}
	return Letter{
		ID: id, Connector: f.Connector, Reason: r.Reason, FailedAt: r.FailedAt, Revision: r.Revision,
		Event: sinks.Event{Partition: r.Partition, SequenceNumber: r.SequenceNumber, Offset: r.Offset,
			EnqueuedTime: r.EnqueuedTime, PartitionKey: r.PartitionKey, ContentType: r.ContentType,
			Properties: r.Properties, Body: body},
	}, nil
}

// selects reports whether flt selects l; a file letter is never replayed.
func selects(flt Filter, l *Letter) bool {
	return (flt.Reason == "" || strings.Contains(l.Reason, flt.Reason)) &&
		(flt.Since.IsZero() || !l.FailedAt.Before(flt.Since)) &&
		(flt.ID == 0 || flt.ID == l.ID)
}

// Counts implements Store.
func (f Files) Counts(ctx context.Context, flt Filter) ([]Count, error) {
	letters, err := f.Letters(ctx, flt)
	if err != nil {
		return nil, err
	}
	type key struct{ partition, reason string }
	byKey := map[key]*Count{}
	var out []*Count
	for _, l := range letters {
		k := key{l.Event.Partition, l.Reason}
		c := byKey[k]
		if c == nil {
			c = &Count{Connector: f.Connector, Partition: k.partition, Reason: k.reason, First: l.FailedAt, Last: l.FailedAt}
			byKey[k] = c
			out = append(out, c)
		}
		c.Letters++
		if l.FailedAt.Before(c.First) {
			c.First = l.FailedAt
		}
		if l.FailedAt.After(c.Last) {
			c.Last = l.FailedAt
		}
	}
	// The order of the PostgreSQL store's list: partitions by number,
	// the most frequent reason first.
	slices.SortFunc(out, func(a, b *Count) int {
		return cmp.Or(cmp.Compare(len(a.Partition), len(b.Partition)), cmp.Compare(a.Partition, b.Partition),
			cmp.Compare(b.Letters, a.Letters), cmp.Compare(a.Reason, b.Reason))
	})
	counts := make([]Count, len(out))
	for i, c := range out {
		counts[i] = *c
	}
	return counts, nil
}

// Replay implements Store: it returns ErrReplayUnsupported.
func (f Files) Replay(context.Context, *Letter, ReplayOptions) (Outcome, error) {
	return Outcome{}, fmt.Errorf("dead-letter files %s: %w (they are append-only: a replay could not mark a letter in the commit that writes its rows)", f.Dir, ErrReplayUnsupported)
}
