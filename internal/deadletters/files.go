package deadletters

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
			if flt.Selects(&l) {
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
	l, err := FromRecord(line)
	l.ID, l.Connector = id, f.Connector
	return l, err
}

// Counts implements Store.
func (f Files) Counts(ctx context.Context, flt Filter) ([]Count, error) {
	letters, err := f.Letters(ctx, flt)
	if err != nil {
		return nil, err
	}
	return CountLetters(f.Connector, letters), nil
}

// Replay implements Store: it returns ErrReplayUnsupported.
func (f Files) Replay(context.Context, *Letter, ReplayOptions) (Outcome, error) {
	return Outcome{}, fmt.Errorf("dead-letter files %s: %w (they are append-only: a replay could not mark a letter in the commit that writes its rows)", f.Dir, ErrReplayUnsupported)
}
