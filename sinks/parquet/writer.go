package parquet

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/dedupe"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/parquetfile"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/sinks"
)

// writer writes one partition: an open commit (data files and dead
// letters) that grows with each Write and is committed by Flush. It is
// used by one goroutine at a time, as sinks.Writer says.
type writer struct {
	s         *sink
	log       *slog.Logger
	partition string
	vars      nameVars
	dataMs    []*matcher // recognise this partition's data files, per route
	dlM       *matcher   // recognises its dead-letter files
	prefixes  []string   // the folders holding all of them
	tag       string
	id        string // names this writer in its claims
	claims    string // the folder of the partition's claims
	// watermark is the last committed position, nil before the first commit.
	watermark *sinks.Position
	file      *openFile // nil when nothing is written since the last commit
	// lastClaim is the claim of this writer's last published commit,
	// removed once the next one is published (claim.go).
	lastClaim string
	closed    bool
	// scratch, reused across Writes
	row  pq.Row
	vals []any
}

var (
	_ sinks.Writer       = (*writer)(nil)
	_ sinks.Batcher      = (*writer)(nil)
	_ sinks.DeadLetterer = (*writer)(nil)
)

// openFile is the commit being gathered: everything taken since the last
// commit, the data files (one, or one per route and value of its path),
// the dead letters, and the range they cover. Every file of a commit is
// named with the commit's whole range.
type openFile struct {
	vars       nameVars // enqueued time and first sequence of the first event taken
	files      []*dataFile
	dl         pending // nil until a dead letter arrives
	dlLines    int
	first      int64 // lowest sequence number taken
	last       int64 // highest sequence number taken
	lastOffset string
	rows       int64
	openedAt   time.Time
	// footerDone is set once the Parquet footers are written: a retried
	// Flush then only retries the commits.
	footerDone  bool
	claimed     bool
	dlCommitted bool
	// claimName is the claim this writer holds on the commit, once claimed.
	claimName string
}

// dataFile is one data file of the open commit: the rows of one route and
// one set of values of its path.
type dataFile struct {
	ri      int      // the route's index
	values  []string // the values of the route's path
	vars    nameVars // values, and the enqueued time of the file's first event
	key     string   // its name with the range left out, unique in a commit
	data    pending
	counter *countingWriter
	pw      *pq.GenericWriter[any]
	rows    int64
	name    string // the final name, set by Flush
	done    bool   // published
	// buffered are the rows of the current Write, written to pw at its
	// end (one WriteRows per file and Write); its spare slots are reused.
	buffered []pq.Row
}

// begin starts the commit whose first taken event is e.
func (w *writer) begin(e *sinks.Event) {
	vars := w.vars
	vars.enqueued = e.EnqueuedTime
	vars.firstSeq = e.SequenceNumber
	vars.lastSeq = e.SequenceNumber
	w.file = &openFile{vars: vars, first: e.SequenceNumber, last: e.SequenceNumber - 1, openedAt: w.s.now()}
}

// dataFile returns the data file of route ri and values in the open
// commit, starting it (its folder fixed by e, its first event) if needed.
// A new file whose name, range aside, is another route's is an error of
// e.
func (w *writer) dataFile(ctx context.Context, ri int, values []string, e *sinks.Event) (*dataFile, error) {
	f := w.file
	if df := w.openDataFile(ri, values); df != nil {
		return df, nil
	}
	vars := w.vars
	vars.values = values
	vars.enqueued = e.EnqueuedTime
	tmpl := w.s.routes[ri].tmpl
	key := tmpl.render(vars)
	for _, df := range f.files {
		if df.key == key {
			return nil, &pathError{fmt.Errorf("route %s: path %s is route %s's file in this commit", w.s.routes[ri].name, key, w.s.routes[df.ri].name)}
		}
	}
	p, err := w.s.store.create(ctx, path.Dir(key), w.tag)
	if err != nil {
		return nil, err
	}
	df := &dataFile{ri: ri, values: values, vars: vars, key: key, data: p, counter: &countingWriter{w: p}}
	// Every file gets a new Parquet writer. A committed file's writer is
	// never Reset for the next one: parquet-go v0.32.0's GenericWriter.Reset
	// leaves path_in_schema empty in every column chunk of the files written
	// after it (parquet-go/parquet-go#602), which Spark, Athena and hyparquet
	// refuse (docs/internals.md, "Known defects of the dependencies").
	df.pw = w.s.newParquetWriter(df.counter, ri)
	f.files = append(f.files, df)
	return df, nil
}

// newParquetWriter starts the Parquet writer of one file of route ri,
// writing to out.
func (s *sink) newParquetWriter(out *countingWriter, ri int) *pq.GenericWriter[any] {
	r := s.routes[ri]
	opts := append([]pq.WriterOption{r.schema, pq.Compression(s.codec), pq.DataPageStatistics(true),
		s.createdBy, pq.DictionaryMaxBytes(parquetfile.DictionaryMaxBytes)}, r.noBounds...)
	return pq.NewGenericWriter[any](out, opts...)
}

// pathError is an event whose file cannot be chosen.
type pathError struct{ err error }

func (e *pathError) Error() string { return e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// Write maps each event to a row of its route and adds it to the route's
// data file in the open commit, starting them if needed. Events that do
// not map (a missing field, a value of the wrong type), that no route
// takes, or whose path values are not allowed are reported in a
// *sinks.BatchError and not written; the runner then dead-letters them
// through DeadLetter. Row groups are written to the temporary files as
// they fill, so memory stays about row_group_size per open file.
func (w *writer) Write(ctx context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	var failed []sinks.EventError
	lastTaken := -1
	for i := range events {
		e := &events[i]
		if w.covered(e.SequenceNumber) {
			// The contract says this does not happen; if it does, writing
			// it again would be a duplicate.
			w.log.Warn("skipping event already taken", "seq", e.SequenceNumber)
			continue
		}
		taken, err := w.writeEvent(ctx, i, e, &failed)
		if err != nil {
			return err
		}
		if taken {
			lastTaken = i
		}
	}
	if w.file != nil {
		for _, df := range w.file.files {
			if len(df.buffered) > 0 {
				if err := w.writeRows(ctx, df, events); err != nil {
					return err
				}
			}
		}
	}
	if lastTaken >= 0 {
		w.file.take(&events[lastTaken])
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// writeEvent maps event i of a batch (e) to its route's file: its rows
// are buffered, or its failures added to failed. It reports whether the
// commit's range takes the event; an error fails the whole batch.
func (w *writer) writeEvent(ctx context.Context, i int, e *sinks.Event, failed *[]sinks.EventError) (bool, error) {
	ri := 0
	var err error
	if w.s.sel != nil {
		if ri, err = w.s.sel.Select(e); err != nil {
			*failed = append(*failed, sinks.EventError{Index: i, Err: err})
			return false, nil
		}
	}
	r := w.s.routes[ri]
	values, err := renderPath(r.name, r.tmpl, e)
	if err != nil {
		*failed = append(*failed, sinks.EventError{Index: i, Err: err})
		return false, nil
	}
	// An event makes one row, or one per element of an exploded
	// array; an element that does not convert is a failure of its
	// own, and the event's other rows are taken.
	rows, err := r.mapper.Mapper().Rows(e)
	if err != nil {
		*failed = append(*failed, sinks.EventError{Index: i, Err: err})
		return false, nil
	}
	df := w.openDataFile(ri, values) // nil until the event's first row
	pathFailed := false
	for j := range rows.Len() {
		// The row is built in the file's next spare slot, reusing its
		// memory, or in the writer's scratch row for a new file.
		var row pq.Row
		if df == nil {
			row = w.row[:0] // copied into the new file's rows below
		} else if n := len(df.buffered); n < cap(df.buffered) {
			row = df.buffered[:n+1][n][:0]
		}
		if row, w.vals, err = r.mapper.MapRow(rows, j, row, w.vals); err != nil {
			*failed = append(*failed, sinks.EventError{Index: i, Err: err})
			continue
		}
		if df == nil {
			if w.file == nil {
				w.begin(e)
			}
			w.row = row
			df, err = w.dataFile(ctx, ri, values, e)
			var pe *pathError
			if errors.As(err, &pe) {
				*failed = append(*failed, sinks.EventError{Index: i, Err: pe.err})
				pathFailed = true
				break
			} else if err != nil {
				rows.Close()
				w.dropPending()
				return false, fmt.Errorf("connector %q partition %s seq %d: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
			}
			row = append(pq.Row(nil), row...)
		}
		df.buffered = append(df.buffered, row)
	}
	rows.Close()
	if pathFailed {
		return false, nil
	}
	// The commit's range covers the event, with its rows or with none (an
	// empty array, or elements that are dead letters).
	if w.file == nil {
		w.begin(e)
	}
	return true, nil
}

// writeRows writes df's pending rows to its file; events are the batch
// they came from, for error messages.
func (w *writer) writeRows(ctx context.Context, df *dataFile, events []sinks.Event) error {
	if _, err := df.pw.WriteRows(df.buffered); err != nil {
		return w.broken(ctx, fmt.Errorf("connector %q partition %s seq %d..%d: write rows: %w",
			w.s.info.Connector, w.partition, events[0].SequenceNumber, events[len(events)-1].SequenceNumber, err))
	}
	df.rows += int64(len(df.buffered))
	w.file.rows += int64(len(df.buffered))
	df.buffered = df.buffered[:0]
	// Row groups go to the file when their buffered size reaches the
	// limit, which bounds memory by row_group_size per open file.
	if df.pw.Size()-df.counter.n >= int64(w.s.cfg.RowGroupSize) {
		if err := df.pw.Flush(); err != nil {
			return w.broken(ctx, fmt.Errorf("connector %q partition %s: write row group: %w", w.s.info.Connector, w.partition, err))
		}
	}
	return nil
}

// openDataFile returns the data file of route ri and values in the open
// commit, or nil.
func (w *writer) openDataFile(ri int, values []string) *dataFile {
	if w.file == nil {
		return nil
	}
	for _, df := range w.file.files {
		if df.ri == ri && slices.Equal(df.values, values) {
			return df
		}
	}
	return nil
}

// dropPending forgets the rows a failed Write gathered and did not write:
// the batch is given again, and they would be written twice.
func (w *writer) dropPending() {
	if w.file == nil {
		return
	}
	for _, df := range w.file.files {
		df.buffered = df.buffered[:0]
	}
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
	if dedupe.Covers(w.watermark, seq) {
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
// JSON, anything else as base64 (internal/record.DeadLetter is the format).
func (w *writer) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	for i := range letters {
		l := &letters[i]
		e := &l.Event
		if dedupe.Covers(w.watermark, e.SequenceNumber) {
			continue
		}
		if w.file == nil {
			w.begin(e)
		}
		f := w.file
		if err := w.deadLetterFile(ctx); err != nil {
			return fmt.Errorf("connector %q partition %s seq %d: dead letter: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
		}
		b := record.AppendDeadLetter(nil, l, deadletters.Revision(ctx))
		if _, err := f.dl.Write(b); err != nil {
			return fmt.Errorf("connector %q partition %s seq %d: dead letter: %w", w.s.info.Connector, w.partition, e.SequenceNumber, err)
		}
		f.dlLines++
		f.take(e)
	}
	return nil
}

// deadLetterFile starts the open commit's dead-letter file, if needed. Its
// folder comes from the commit's first event, as the data file's of a
// sink without routes.
func (w *writer) deadLetterFile(ctx context.Context) error {
	f := w.file
	if f.dl != nil {
		return nil
	}
	p, err := w.s.store.create(ctx, path.Dir(w.s.dlTmpl.render(f.vars)), w.tag)
	if err != nil {
		return err
	}
	f.dl = p
	return nil
}

// FlushDue reports whether the open commit should roll: it holds max_rows
// rows, its files' estimated size reached max_bytes, it has max_open_files
// files (with routes), or its first event was taken max_age ago.
func (w *writer) FlushDue(now time.Time) bool {
	f := w.file
	if f == nil || w.closed {
		return false
	}
	c := &w.s.cfg
	var size int64
	for _, df := range f.files {
		size += df.pw.Size()
	}
	return f.rows >= c.MaxRows ||
		size >= int64(c.MaxBytes) ||
		w.s.routed() && len(f.files) >= c.MaxOpenFiles ||
		!now.Before(f.openedAt.Add(c.MaxAge))
}

// recordRange makes sure a commit records its range: a commit of dead
// letters only gets a data file without rows (without routes, in the
// folder of its first event), and with routes a commit that made no row
// gets an empty dead-letter file.
func (w *writer) recordRange(ctx context.Context, f *openFile) error {
	if len(f.files) == 0 && !w.s.routed() {
		// The range of a commit of dead letters only is recorded by a data
		// file without rows, in the folder of its first event.
		e := sinks.Event{EnqueuedTime: f.vars.enqueued}
		if _, err := w.dataFile(ctx, 0, nil, &e); err != nil {
			return fmt.Errorf("connector %q partition %s seq %d..%d: %w", w.s.info.Connector, w.partition, f.first, f.last, err)
		}
	}
	if len(f.files) == 0 && f.dl == nil {
		// With routes, a commit of events that made no row (empty
		// exploded arrays) records its range in an empty dead-letter file.
		if err := w.deadLetterFile(ctx); err != nil {
			return fmt.Errorf("connector %q partition %s seq %d..%d: %w", w.s.info.Connector, w.partition, f.first, f.last, err)
		}
	}
	return nil
}

// nameFiles names every file of commit f with the commit's whole range,
// sorted by name, and returns the name of its dead-letter file.
func (w *writer) nameFiles(f *openFile) string {
	vars := f.vars
	vars.firstSeq, vars.lastSeq = f.first, f.last
	dlName := w.s.dlTmpl.render(vars)
	for _, df := range f.files {
		v := df.vars
		v.firstSeq, v.lastSeq = f.first, f.last
		df.name = w.s.routes[df.ri].tmpl.render(v)
	}
	slices.SortFunc(f.files, func(a, b *dataFile) int { return strings.Compare(a.name, b.name) })
	return dlName
}

// writeFooters closes the commit's Parquet writers, with the range and
// the partition in each footer's key-value metadata. Done once per commit.
func (w *writer) writeFooters(ctx context.Context, f *openFile) error {
	if !f.footerDone {
		for _, df := range f.files {
			df.pw.SetKeyValueMetadata(metaEventHub, w.vars.eventHub)
			df.pw.SetKeyValueMetadata(metaPartition, w.partition)
			df.pw.SetKeyValueMetadata(metaFirstSeq, strconv.FormatInt(f.first, 10))
			df.pw.SetKeyValueMetadata(metaLastSeq, strconv.FormatInt(f.last, 10))
			df.pw.SetKeyValueMetadata(metaLastOffset, f.lastOffset)
			if err := df.pw.Close(); err != nil {
				return w.broken(ctx, fmt.Errorf("connector %q partition %s seq %d..%d: write footer of %q: %w", w.s.info.Connector, w.partition, f.first, f.last, df.name, err))
			}
		}
		f.footerDone = true
	}
	return nil
}

// Flush commits the open commit: it writes the Parquet footers (with the
// sequence range and last offset as key-value metadata), claims the
// commit, publishes the dead-letter file if any, then the data files in
// the order of their names, and returns the new watermark. Every file of a
// commit is named with the commit's whole range. Without routes the data
// file is published last because its name is the watermark Open finds: a
// dead-letter file without its data file is removed by Open and written
// again by the replay; a commit with only dead letters still gets a data
// file, with no rows. With routes, any file of a commit shows its range,
// so Open publishes the rest of the newest commit from its claim. A failed
// Flush keeps the files; calling Flush again retries the commits.
func (w *writer) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	f := w.file
	if f == nil {
		return w.watermark, nil
	}
	if err := w.recordRange(ctx, f); err != nil {
		return nil, err
	}
	dlName := w.nameFiles(f)
	name := dlName
	if len(f.files) > 0 {
		name = f.files[0].name
	}
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
	if err := w.writeFooters(ctx, f); err != nil {
		return nil, err
	}
	if !f.claimed {
		// Fence: another owner of the partition (a steal, a paused process
		// waking up) may have committed since this writer's watermark was
		// read. The files' rows are already written, so a commit that
		// overlaps a newer one is dropped whole rather than trimmed.
		if pos, err := w.fence(ctx, f); err != nil || pos != nil {
			return pos, err
		}
		// The claim closes the window between that look and the publish
		// (claim.go).
		if err := w.claim(ctx, f, dlName); err != nil {
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
	for _, df := range f.files {
		if df.done {
			continue
		}
		if err := df.data.commit(ctx, df.name); err != nil {
			name = df.name
			return fail("commit", err)
		}
		df.done = true
	}
	w.watermark = &sinks.Position{SequenceNumber: f.last, Offset: f.lastOffset}
	w.file = nil
	if w.lastClaim != "" && w.lastClaim != f.claimName {
		w.removeClaim(ctx, w.lastClaim)
	}
	w.lastClaim = f.claimName
	for _, df := range f.files { // one line per published file: where, and what it holds
		w.log.Info("parquet file committed", "file", committedPath(w.s.store, df.name), "rows", df.rows)
	}
	w.log.Debug("committed", "files", len(f.files), "rows", f.rows, "dead_letters", f.dlLines, "first_seq", f.first, "last_seq", f.last)
	return w.watermark, nil
}

// fence checks the committed files of the partition against the open file
// f. If another writer committed all of f's range, f is discarded and the
// newer watermark returned; if it committed part of it, f is discarded and
// the error wraps sinks.ErrFenced, so the runner gives the partition up and
// resumes after the newer commit. Otherwise both results are nil.
func (w *writer) fence(ctx context.Context, f *openFile) (*sinks.Position, error) {
	objs, err := w.list(ctx)
	if err != nil {
		return nil, fmt.Errorf("connector %q partition %s: list committed files: %w", w.s.info.Connector, w.partition, err)
	}
	last, newest := w.newest(objs)
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
	return nil
}

// discard drops the open commit and its temporaries.
func (w *writer) discard() {
	f := w.file
	if f == nil {
		return
	}
	w.file = nil
	for _, df := range f.files {
		if err := df.data.abort(); err != nil {
			w.log.Warn("discarding temporary file", "err", err)
		}
	}
	if f.dl != nil {
		if err := f.dl.abort(); err != nil {
			w.log.Warn("discarding temporary dead-letter file", "err", err)
		}
	}
}
