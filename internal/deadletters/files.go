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
	l, err := DecodeRecord(line)
	l.ID, l.Connector = id, f.Connector
	return l, err
}

// DecodeRecord decodes a letter kept as the JSON line of package
// internal/record (the dead-letter files, the record column of the
// table sinks' dead-letter tables): the event as received, the reason,
// the time and the revision. ID, Connector and Table are the caller's.
func DecodeRecord(line []byte) (Letter, error) {
	var r struct {
		record.DeadLetter
		// Properties are decoded apart: whole numbers stay int64.
		Properties json.RawMessage `json:"properties"`
	}
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
	var props map[string]any
	if len(r.Properties) > 0 && string(r.Properties) != "null" {
		var err error
		if props, err = DecodeProperties(r.Properties); err != nil {
			return Letter{}, fmt.Errorf("properties: %w", err)
		}
	}
	return Letter{
		Reason: r.Reason, FailedAt: r.FailedAt, Revision: r.Revision,
		Event: sinks.Event{Partition: r.Partition, SequenceNumber: r.SequenceNumber, Offset: r.Offset,
			EnqueuedTime: r.EnqueuedTime, PartitionKey: r.PartitionKey, ContentType: r.ContentType,
			Properties: props, Body: body},
	}, nil
}

// DecodeProperties reads back application properties stored as a JSON
// object, with whole numbers as int64 (what Event Hubs' integer
// properties are) rather than float64, so a mapping reads them as it read
// the event.
func DecodeProperties(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	for k, v := range m {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				m[k] = i
			} else if f, err := n.Float64(); err == nil {
				m[k] = f
			}
		}
	}
	return m, nil
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
	return CountLetters(letters), nil
}

// CountLetters counts letters by connector, partition and reason, in the
// order of the PostgreSQL store's list: partitions by number, the most
// frequent reason first. It is Counts for a store that reads its letters
// whole.
func CountLetters(letters []Letter) []Count {
	type key struct{ connector, partition, reason string }
	byKey := map[key]*Count{}
	var out []*Count
	for _, l := range letters {
		k := key{l.Connector, l.Event.Partition, l.Reason}
		c := byKey[k]
		if c == nil {
			c = &Count{Connector: k.connector, Partition: k.partition, Reason: k.reason, First: l.FailedAt, Last: l.FailedAt}
			byKey[k] = c
			out = append(out, c)
		}
		c.Letters++
		if l.ReplayedAt != nil {
			c.Replayed++
		}
		if l.FailedAt.Before(c.First) {
			c.First = l.FailedAt
		}
		if l.FailedAt.After(c.Last) {
			c.Last = l.FailedAt
		}
	}
	slices.SortFunc(out, func(a, b *Count) int {
		return cmp.Or(cmp.Compare(a.Connector, b.Connector), cmp.Compare(len(a.Partition), len(b.Partition)), cmp.Compare(a.Partition, b.Partition),
			cmp.Compare(b.Letters, a.Letters), cmp.Compare(a.Reason, b.Reason))
	})
	counts := make([]Count, len(out))
	for i, c := range out {
		counts[i] = *c
	}
	return counts
}

// Replay implements Store: it returns ErrReplayUnsupported.
func (f Files) Replay(context.Context, *Letter, ReplayOptions) (Outcome, error) {
	return Outcome{}, fmt.Errorf("dead-letter files %s: %w (they are append-only: a replay could not mark a letter in the commit that writes its rows)", f.Dir, ErrReplayUnsupported)
}
