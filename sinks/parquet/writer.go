package parquet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"strconv"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/sinks"
)

// writer writes one partition: an open file (data and dead letters) that
// grows with each Write and is committed by Flush. It is used by one
// goroutine at a time, as sinks.Writer says.
type writer struct {
	s         *Sink
	log       *slog.Logger
	partition string
	vars      nameVars
	dataM     *matcher // recognises this partition's data files
	tag       string
	id        string // names this writer in its claims
	claims    string // the folder of the partition's claims
	// watermark is the last committed position, nil before the first commit.
	watermark *sinks.Position
	file      *openFile // nil when nothing is written since the last commit
	pw        *pq.Writer
	closed    bool
	// scratch, reused across Writes
	rows []pq.Row
	vals []any
}

var (
	_ sinks.Writer       = (*writer)(nil)
	_ sinks.Batcher      = (*writer)(nil)
	_ sinks.DeadLetterer = (*writer)(nil)
)

// openFile is the file being gathered: everything taken since the last
// commit, data rows and dead letters, and the range they cover.
type openFile struct {
	vars       nameVars // enqueued time and first sequence of the first event taken
	dir        string   // folder of the data file, fixed by the first event
	data       pending
	counter    *countingWriter
	dl         pending // nil until a dead letter arrives
	dlLines    int
	first      int64 // lowest sequence number taken
	last       int64 // highest sequence number taken
	lastOffset string
	rows       int64
	openedAt   time.Time
	// footerDone is set once the Parquet footer is written: a retried
	// Flush then only retries the commits.
	footerDone  bool
	claimed     bool
	dlCommitted bool
}

// newFile starts a file whose first taken event is e.
func (w *writer) newFile(ctx context.Context, e *sinks.Event) error {
	vars := w.vars
	vars.enqueued = e.EnqueuedTime
	vars.firstSeq = e.SequenceNumber
	vars.lastSeq = e.SequenceNumber
	dir := path.Dir(w.s.tmpl.render(vars))
	p, err := w.s.store.create(ctx, dir, w.tag)
	if err != nil {
		return err
	}
	f := &openFile{vars: vars, dir: dir, data: p, counter: &countingWriter{w: p},
		first: e.SequenceNumber, last: e.SequenceNumber - 1, openedAt: w.s.now()}
	if w.pw == nil {
		w.pw = pq.NewWriter(f.counter, w.s.schema, pq.Compression(w.s.codec),
			pq.DataPageStatistics(true), pq.CreatedBy("ehsink", "", ""))
	} else {
		w.pw.Reset(f.counter)
	}
	w.file = f
	return nil
}

// Write maps each event to a row and adds it to the open file, starting
// one if needed. Events that do not map (a missing field, a value of the
// wrong type) are reported in a *sinks.BatchError and not written; the
// runner then dead-letters them through DeadLetter. Row groups are written
// to the temporary file as they fill, so memory stays about row_group_size.
func (w *writer) Write(ctx context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	var failed []sinks.EventError
	w.rows = w.rows[:0]
	lastTaken := -1
	for i := range events {
		e := &events[i]
		if w.covered(e.SequenceNumber) {
			// The contract says this does not happen; if it does, writing
			// it again would be a duplicate.
			w.log.Warn("skipping event already taken", "seq", e.SequenceNumber)
			continue
		}
		// An event makes one row, or one per element of an exploded
		// array; an element that does not convert is a failure of its
		// own, and the event's other rows are taken.
		rows, err := w.s.mapper.m.Rows(e)
		if err != nil {
			failed = append(failed, sinks.EventError{Index: i, Err: err})
			continue
		}
		for j := range rows.Len() {
			var row pq.Row
			if len(w.rows) < cap(w.rows) {
				row = w.rows[:len(w.rows)+1][len(w.rows)][:0]
			}
			if row, w.vals, err = w.s.mapper.mapRow(rows, j, row, w.vals); err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
				continue
			}
			if w.file == nil {
				if err := w.newFile(ctx, e); err != nil {
					rows.Close()
					return fmt.Errorf("connector %q partition %s seq %d: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
				}
			}
			w.rows = append(w.rows, row)
		}
		rows.Close()
		lastTaken = i // the file's range covers it, with its rows or with none (an empty array)
	}
	if len(w.rows) > 0 {
		if _, err := w.pw.WriteRows(w.rows); err != nil {
			return w.broken(ctx, fmt.Errorf("connector %q partition %s seq %d..%d: write rows: %w",
				w.s.info.Connector, w.partition, events[0].SequenceNumber, events[len(events)-1].SequenceNumber, err))
		}
		w.file.rows += int64(len(w.rows))
		w.file.take(&events[lastTaken])
		// Row groups go to the file when their buffered size reaches the
		// limit, which bounds memory by row_group_size per partition.
		if w.pw.Size()-w.file.counter.n >= int64(w.s.cfg.RowGroupSize) {
			if err := w.pw.Flush(); err != nil {
				return w.broken(ctx, fmt.Errorf("connector %q partition %s: write row group: %w", w.s.info.Connector, w.partition, err))
			}
		}
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// take extends the file's range to e.
func (f *openFile) take(e *sinks.Event) {
	if e.SequenceNumber < f.first {
		f.first = e.SequenceNumber
	}
	if e.SequenceNumber > f.last {
		f.last = e.SequenceNumber
		f.lastOffset = e.Offset
	}
}

// covered reports whether seq is already committed or in the open file.
func (w *writer) covered(seq int64) bool {
	if sinks.Covers(w.watermark, seq) {
		return true
	}
	return w.file != nil && seq <= w.file.last
}

// broken discards the open file after a failure that leaves the Parquet
// writer in an unknown state. The events are lost from this writer, so the
// error tells the runner to reopen the partition and replay.
func (w *writer) broken(_ context.Context, err error) error {
	w.discard()
	return fmt.Errorf("%w (the open file was discarded; reopen the partition to replay from the watermark)", err)
}

// DeadLetter adds dead letters to the open file's dead-letter file, a JSON
// lines file in a _dead_letters folder next to the data, committed by the
// next Flush together with the data file. A body that is JSON is kept as
// JSON, anything else as base64 (sinks.DeadLetterRecord is the format).
func (w *writer) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	for i := range letters {
		l := &letters[i]
		e := &l.Event
		if sinks.Covers(w.watermark, e.SequenceNumber) {
			continue
		}
		if w.file == nil {
			if err := w.newFile(ctx, e); err != nil {
				return fmt.Errorf("connector %q partition %s seq %d: dead letter: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
			}
		}
		f := w.file
		if f.dl == nil {
			p, err := w.s.store.create(ctx, path.Join(f.dir, deadLetterDir), w.tag)
			if err != nil {
				return fmt.Errorf("connector %q partition %s seq %d: dead letter: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
			}
			f.dl = p
		}
		b := l.AppendLine(nil)
		if _, err := f.dl.Write(b); err != nil {
			return fmt.Errorf("connector %q partition %s seq %d: dead letter: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
		}
		f.dlLines++
		f.take(e)
	}
	return nil
}

// FlushDue reports whether the open file should roll: it holds max_rows
// rows, its estimated size reached max_bytes, or its first event was taken
// max_age ago.
func (w *writer) FlushDue(now time.Time) bool {
	f := w.file
	if f == nil || w.closed {
		return false
	}
	c := &w.s.cfg
	return f.rows >= c.MaxRows ||
		w.pw.Size() >= int64(c.MaxBytes) ||
		!now.Before(f.openedAt.Add(c.MaxAge))
}

// Flush commits the open file: it writes the Parquet footer (with the
// sequence range and last offset as key-value metadata), commits the
// dead-letter file if any, then the data file, and returns the new
// watermark. The data file is committed last because its name is the
// watermark Open finds: a dead-letter file without its data file is
// removed by Open and written again by the replay. A file with only dead
// letters still gets a data file, with no rows. A failed Flush keeps the
// file; calling Flush again retries the commits.
func (w *writer) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	f := w.file
	if f == nil {
		return w.watermark, nil
	}
	vars := f.vars
	vars.firstSeq, vars.lastSeq = f.first, f.last
	name, dlName := w.s.tmpl.render(vars), w.s.dlTmpl.render(vars)
	fail := func(what string, err error) (*sinks.Position, error) {
		if errors.Is(err, errGone) {
			// Another owner opened the partition after this writer claimed
			// its commit, and finished or dropped that commit (Open does
			// so for claims left unfinished): this writer lost the
			// partition, which the runner hands back, rather than failing.
			err = fmt.Errorf("%w: %w", sinks.ErrFenced, err)
		}
		return nil, fmt.Errorf("connector %q partition %s seq %d..%d: %s %q: %w", w.s.info.Connector, w.partition, f.first, f.last, what, name, err)
	}
	if !f.footerDone {
		w.pw.SetKeyValueMetadata(metaEventHub, w.vars.eventHub)
		w.pw.SetKeyValueMetadata(metaPartition, w.partition)
		w.pw.SetKeyValueMetadata(metaFirstSeq, strconv.FormatInt(f.first, 10))
		w.pw.SetKeyValueMetadata(metaLastSeq, strconv.FormatInt(f.last, 10))
		w.pw.SetKeyValueMetadata(metaLastOffset, f.lastOffset)
		if err := w.pw.Close(); err != nil {
			return nil, w.broken(ctx, fmt.Errorf("connector %q partition %s seq %d..%d: write footer of %q: %w", w.s.info.Connector, w.partition, f.first, f.last, name, err))
		}
		f.footerDone = true
	}
	if !f.claimed {
		// Fence: another owner of the partition (a steal, a paused process
		// waking up) may have committed since this writer's watermark was
		// read. The file's rows are already written, so a file that
		// overlaps a newer commit is dropped whole rather than trimmed.
		if pos, err := w.fence(ctx, f); err != nil || pos != nil {
			return pos, err
		}
		// The claim closes the window between that look and the publish
		// (claim.go).
		if err := w.claim(ctx, f, name, dlName); err != nil {
			if errors.Is(err, sinks.ErrFenced) {
				return nil, fmt.Errorf("connector %q partition %s seq %d..%d: %w", w.s.info.Connector, w.partition, f.first, f.last, err)
			}
			return fail("claim the commit of", err)
		}
		f.claimed = true
	}
	if f.dl != nil && !f.dlCommitted {
		if err := f.dl.commit(ctx, dlName); err != nil {
			return fail("commit dead letters of", err)
		}
		f.dlCommitted = true
	}
	if err := f.data.commit(ctx, name); err != nil {
		return fail("commit", err)
	}
	w.watermark = &sinks.Position{SequenceNumber: f.last, Offset: f.lastOffset}
	w.file = nil
	w.log.Debug("committed file", "file", name, "rows", f.rows, "dead_letters", f.dlLines, "first_seq", f.first, "last_seq", f.last)
	return w.watermark, nil
}

// fence checks the committed files of the partition against the open file
// f. If another writer committed all of f's range, f is discarded and the
// newer watermark returned; if it committed part of it, f is discarded and
// the error wraps sinks.ErrFenced, so the runner gives the partition up and
// resumes after the newer commit. Otherwise both results are nil.
func (w *writer) fence(ctx context.Context, f *openFile) (*sinks.Position, error) {
	objs, err := w.s.store.list(ctx, w.dataM.prefix)
	if err != nil {
		return nil, fmt.Errorf("connector %q partition %s: list committed files: %w", w.s.info.Connector, w.partition, err)
	}
	last, newest := newestData(objs, w.dataM)
	if last < f.first {
		return nil, nil
	}
	w.discard()
	if last < f.last {
		return nil, fmt.Errorf("connector %q partition %s: seq %d..%d overlaps a file another writer committed up to seq %d: %w",
			w.s.info.Connector, w.partition, f.first, f.last, last, sinks.ErrFenced)
	}
	pos, err := w.s.positionOf(ctx, newest, last)
	if err != nil {
		return nil, fmt.Errorf("connector %q partition %s: %w", w.s.info.Connector, w.partition, err)
	}
	w.watermark = pos
	w.log.Info("another writer committed this range first; dropped ours", "first_seq", f.first, "last_seq", f.last, "committed_seq", last)
	return pos, nil
}

// Close discards the open file, if any: nothing of it becomes visible. The
// runner flushes first when it wants to keep it. Close is idempotent.
func (w *writer) Close(context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.discard()
	w.pw = nil
	return nil
}

// discard drops the open file and its temporaries.
func (w *writer) discard() {
	f := w.file
	if f == nil {
		return
	}
	w.file = nil
	if err := f.data.abort(); err != nil {
		w.log.Warn("discarding temporary file", "err", err)
	}
	if f.dl != nil {
		if err := f.dl.abort(); err != nil {
			w.log.Warn("discarding temporary dead-letter file", "err", err)
		}
	}
	// The Parquet writer may hold half a row group of the discarded file.
	w.pw = nil
}
