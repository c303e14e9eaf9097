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
	"strconv"

	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// Files reads the dead-letter files of a connector whose sink does not keep
// its letters itself (errors.dead_letter.dir: one file of JSON lines per
// partition, written by the runner). The files are append-only, so they
// cannot say which letters were replayed: [WriterStore] keeps that mark in
// the sink. A letter's ID is [LetterID] of its partition and its line in
// that partition's file, stable while the files are appended to. A torn
// last line (a crash mid-write) is passed over.
type Files struct {
	// Dir is the folder of the files.
	Dir string
	// Connector names the connector the letters are reported under.
	Connector string
}

var _ Source = Files{}

// ReadLetters implements Source.
func (f Files) ReadLetters(ctx context.Context) ([]Letter, error) {
	entries, err := os.ReadDir(f.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter files: %w", err)
	}
	var out []Letter
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".jsonl" {
			continue
		}
		path := filepath.Join(f.Dir, e.Name())
		file, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("dead-letter files: %w", err)
		}
		letters, err := ReadLines(ctx, file, f.Connector, path, 0)
		file.Close()
		if err != nil {
			return nil, err
		}
		out = append(out, letters...)
	}
	return out, nil
}

// ReadLines reads the dead letters of one partition's JSON lines (the
// format of internal/record) from r, named where in errors and letters'
// Table. The first line is the partition's letter after, as [LetterID]
// counts them. Each line must hold a letter of one partition. What
// follows the last newline is a torn line, or nothing: passed over.
func ReadLines(ctx context.Context, r io.Reader, connector, where string, after int64) ([]Letter, error) {
	br := bufio.NewReader(r)
	var out []Letter
	partition := ""
	for n := after + 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("dead-letter file %s: %w", where, err)
		}
		l, err := DecodeRecord(bytes.TrimSuffix(line, []byte("\n")))
		if err == nil && partition != "" && l.Event.Partition != partition {
			err = fmt.Errorf("partition %q in a file of partition %q", l.Event.Partition, partition)
		}
		if err == nil {
			l.ID, err = LetterID(l.Event.Partition, n)
		}
		if err != nil {
			return nil, fmt.Errorf("dead-letter file %s: line %d: %w", where, n-after, err)
		}
		partition = l.Event.Partition
		l.Connector, l.Table = connector, where
		out = append(out, l)
	}
}

// lettersPerPartition is how many letters of one partition IDs can tell
// apart: a letter's ID is partition × lettersPerPartition + its number in
// the partition.
const lettersPerPartition = 1_000_000_000

// LetterID is the ID of the n-th letter (from 1) of partition, which must
// be a number, as Event Hubs partition IDs are: partition 0's letters are
// 1, 2, ...; partition 3's 3000000001, .... An ID depends on its own
// partition's letters only, so a letter appended to one partition moves
// no other's.
func LetterID(partition string, n int64) (int64, error) {
	p, err := strconv.ParseInt(partition, 10, 64)
	switch {
	case err != nil || p < 0 || p > (1<<63-1)/lettersPerPartition-1:
		return 0, fmt.Errorf("partition %q: want a partition number (0 to %d) to number its letters", partition, (1<<63-1)/lettersPerPartition-1)
	case n < 1 || n >= lettersPerPartition:
		return 0, fmt.Errorf("partition %s: letter %d: want 1 to %d letters a partition", partition, n, lettersPerPartition-1)
	}
	return p*lettersPerPartition + n, nil
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
