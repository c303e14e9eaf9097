package deadletters

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
		l, err := parseLetter(bytes.TrimSuffix(line, []byte("\n")))
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

// parseLetter decodes one line of the dead-letter format.
func parseLetter(line []byte) (Letter, error) {
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
		Reason: r.Reason, FailedAt: r.FailedAt, Revision: r.Revision,
		Event: sinks.Event{Partition: r.Partition, SequenceNumber: r.SequenceNumber, Offset: r.Offset,
			EnqueuedTime: r.EnqueuedTime, PartitionKey: r.PartitionKey, ContentType: r.ContentType,
			Properties: r.Properties, Body: body},
	}, nil
}
