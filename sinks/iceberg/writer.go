package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/table/commit"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// Steps of a commit, as the test hook sees them.
const (
	stepDataWritten     = "data written"
	stepManifestWritten = "manifest written"
	stepBeforeSwap      = "before catalog swap"
	stepAfterSwap       = "after catalog swap"
)

// maxCommitAttempts bounds the retries of a commit that lost the race for
// the table to other writers; the Flush then fails as transient and the
// runner calls it again.
const maxCommitAttempts = 20

// writer writes one partition: the rows gathered since the last commit,
// in memory, per table, and the range of events they cover. It is used by
// one goroutine at a time, as sinks.Writer says.
type writer struct {
	s         *sink
	log       *slog.Logger
	partition string
	key       string // the summary key of its watermark
	tag       [6]byte
	// parts are the partition's share of each route's table, as s.dests
	// (nil for a templated route, whose tables' parts are in named); dl
	// is its share of the dead-letter table; all holds every part, dl
	// first, in the order a flush commits them.
	parts    []*part
	named    map[*dest]*part
	dl       *part
	all      []*part
	open     bool // a commit is being gathered
	first    int64
	last     int64
	lastOff  string
	openedAt time.Time
	// held counts the events of the open commit that their table already
	// holds (skipped by a routed writer resuming from its checkpoint);
	// trimmed is the count of the last successful Flush.
	held    int
	trimmed int
	vals    []any
	closed  bool
}

// part is what a writer gathers for one table and the state of its
// commit there.
type part struct {
	d *dest
	// watermark is the last position this partition committed to the
	// table, nil before the first.
	watermark *sinks.Position
	rows      *rowBuilder
	// record holds the gathered rows once Flush took them from rows, until
	// the commit; files are the data files written from it.
	record  arrow.RecordBatch
	written bool
	files   []ice.DataFile
	// ambiguous says a commit attempt ended without knowing whether the
	// catalog took it: the files are then never removed by this writer.
	ambiguous bool
	// always makes every flush commit to the table, with or without rows
	// (a snapshot without files moves the watermark): the one table of a
	// sink without routes, which the partition resumes from.
	always bool
}

var (
	_ sinks.Writer  = (*writer)(nil)
	_ sinks.Batcher = (*writer)(nil)
	_ sinks.Trimmer = (*writer)(nil)
)

// Write maps each event to rows of its table and gathers them for the
// next commit. Events that do not map (a missing field, a value of the
// wrong type) or that no route takes are reported in a *sinks.BatchError
// and left out; the commit's range still covers them, as the runner
// dead-letters them before the Flush.
func (w *writer) Write(ctx context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	for _, p := range w.all {
		if p.record != nil {
			return errors.New("write after a failed flush: flush again first")
		}
	}
	var failed []sinks.EventError
	held := 0
	for i := range events {
		e := &events[i]
		if w.s.sel == nil && dedupe.Covers(w.parts[0].watermark, e.SequenceNumber) || w.open && e.SequenceNumber <= w.last {
			w.log.Warn("skipping event already taken", "seq", e.SequenceNumber)
			continue
		}
		p, err, infra := w.route(ctx, e)
		if infra != nil {
			// Nothing of e taken: the runner retries the batch, whose
			// events up to here are skipped as already taken.
			return fmt.Errorf("connector %q partition %s seq %d: %w", w.s.info.Connector, w.partition, e.SequenceNumber, infra)
		}
		switch {
		case err != nil:
			failed = append(failed, sinks.EventError{Index: i, Err: err})
		case dedupe.Covers(p.watermark, e.SequenceNumber):
			held++
		default:
			if err := w.writeEvent(p, e); err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
			}
		}
		if !w.open {
			w.open, w.first, w.openedAt = true, e.SequenceNumber, w.s.now()
		}
		w.last, w.lastOff = e.SequenceNumber, e.Offset
	}
	if held > 0 {
		w.log.Info("skipping events their table already holds", "events", held, "up_to_seq", w.last)
		w.held += held
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// route returns the part of e's table, or the event's error, or an
// error of the catalog (infra) when a templated route's table cannot be
// loaded.
func (w *writer) route(ctx context.Context, e *sinks.Event) (p *part, err, infra error) {
	d, i, err, infra := w.s.destOf(ctx, e)
	if err != nil || infra != nil {
		return nil, err, infra
	}
	if w.s.tmpls[i] == nil {
		return w.parts[i], nil, nil
	}
	if p = w.named[d]; p == nil {
		if p, infra = w.openPart(ctx, d); infra != nil {
			return nil, nil, infra
		}
		if w.named == nil {
			w.named = map[*dest]*part{}
		}
		w.named[d] = p
	}
	return p, nil, nil
}

// destOf returns the table of e and the index of its route, or the
// event's error, or an error of the catalog (infra) when a templated
// route's table cannot be loaded.
func (s *sink) destOf(ctx context.Context, e *sinks.Event) (d *dest, route int, err, infra error) {
	if s.sel == nil {
		return s.dests[0], 0, nil, nil
	}
	i, err := s.sel.Select(e)
	if err != nil {
		return nil, 0, err, nil
	}
	if s.tmpls[i] == nil {
		return s.dests[i], i, nil, nil
	}
	d, err, infra = s.namedBy(ctx, i, e)
	return d, i, err, infra
}

// writeEvent adds the rows of e to p; an error is the event's. An exploded
// element that does not map fails the event and its other rows are kept.
func (w *writer) writeEvent(p *part, e *sinks.Event) error { return w.mapEvent(p, e, p.rows.add) }

// mapEvent maps e to rows of p's table and calls add with each row that
// fits the table (vals is reused after add returns).
func (w *writer) mapEvent(p *part, e *sinks.Event, add func(vals []any)) error {
	rows, err := p.d.mapper.Rows(e)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := len(p.d.cols)
	if cap(w.vals) < n {
		w.vals = make([]any, n)
	}
	vals := w.vals[:n]
	var first error
	for j := range rows.Len() {
		err := rows.Map(j, vals)
		if err == nil {
			err = p.rows.check(vals)
		}
		if err != nil {
			if rows.Exploded() {
				err = &mapping.ElementError{Index: j, Err: err}
			}
			if first == nil {
				first = err
			}
			continue
		}
		add(vals)
	}
	return first
}

// FlushDue reports whether the gathered rows should be committed: there
// are max_rows of them, their estimated size reached max_bytes (over all
// tables), or the first was taken max_age ago.
func (w *writer) FlushDue(now time.Time) bool {
	if !w.open || w.closed {
		return false
	}
	c := &w.s.cfg
	var rows, bytes int64
	for _, p := range w.all {
		rows, bytes = rows+p.rows.rows, bytes+p.rows.bytes
	}
	return rows >= c.MaxRows || bytes >= int64(c.MaxBytes) || !now.Before(w.openedAt.Add(c.MaxAge))
}

// Trimmed reports how many events of the last successful Flush were not
// written because their table already held them.
func (w *writer) Trimmed() int { return w.trimmed }

// Flush commits the gathered rows as one Iceberg snapshot per table that
// took rows (without routes, the table commits even when it took none: a
// snapshot without files still moves its watermark). For each table it
// writes the rows to Parquet data files (iceberg-go's WriteRecords, with
// the table's field IDs and statistics), then appends the files in one
// commit whose snapshot summary carries the partition's new watermark.
// The commit asserts the table's current snapshot: if another writer
// committed first, the table is reloaded and, unless that writer advanced
// this partition's watermark (this writer is then a stale owner: it
// removes its files and returns sinks.ErrFenced), the commit is made again
// on the new metadata with the same files. A failed Flush keeps the rows
// and files of the tables it did not commit; calling Flush again retries
// those.
func (w *writer) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	if !w.open {
		w.trimmed = 0
		if w.s.sel != nil {
			return nil, nil
		}
		return w.parts[0].watermark, nil
	}
	pos := &sinks.Position{SequenceNumber: w.last, Offset: w.lastOff}
	for _, p := range w.all {
		if p.record == nil && (p.always || p.rows.rows > 0) {
			p.record = p.rows.record()
		}
		if p.record == nil {
			continue
		}
		if err := w.commitPart(ctx, p, pos); err != nil {
			return nil, fmt.Errorf("connector %q partition %s seq %d..%d: %w", w.s.info.Connector, w.partition, w.first, w.last, err)
		}
		w.log.Info("iceberg snapshot committed", "table", p.d.name(), "rows", p.record.NumRows(), "files", len(p.files), "first_seq", w.first, "last_seq", w.last)
		p.reset()
		p.watermark = pos
		w.s.maybeMaintain(ctx, p.d)
	}
	w.open, w.trimmed, w.held = false, w.held, 0
	return pos, nil
}

// commitPart writes p's data files, unless an earlier attempt did, and
// commits them up to pos.
func (w *writer) commitPart(ctx context.Context, p *part, pos *sinks.Position) error {
	if !p.written {
		if err := w.writeFiles(ctx, p); err != nil {
			return unreachable(err)
		}
	}
	for attempt := 1; ; attempt++ {
		done, err := w.commit(ctx, p, pos)
		if done {
			return nil
		}
		if errors.Is(err, sinks.ErrFenced) {
			// Dropped once commit let the table's mutex go: discard takes
			// the other tables' mutexes, and a writer of another
			// partition fenced on one of those at the same time would
			// wait for this one's while holding its own.
			w.discard(ctx)
			return err
		}
		var injected *commit.StepError
		if errors.As(err, &injected) {
			return err
		}
		if attempt >= maxCommitAttempts {
			return unreachable(err)
		}
		// Lost the race to another writer (the catalog refused the
		// requirement), or the answer was lost: look again, on the
		// catalog's current metadata, which also tells whether a commit
		// whose answer was lost went through.
		w.log.Debug("commit refused; reloading the table", "table", p.d.name(), "attempt", attempt, "err", err)
		if err := backoff(ctx, attempt); err != nil {
			return unreachable(err)
		}
		if _, err := w.s.refresh(ctx, p.d); err != nil {
			return unreachable(err)
		}
	}
}

// writeFiles writes p's gathered rows to data files of its table.
func (w *writer) writeFiles(ctx context.Context, p *part) error {
	var files []ice.DataFile
	if p.record.NumRows() > 0 {
		tbl := p.d.current()
		p.record.Retain() // WriteRecords releases what it takes; a retry needs it again
		rec := p.record
		records := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
		for df, err := range table.WriteRecords(ctx, tbl, p.d.arrow, records, table.WithWriteUUID(writeUUID(w.tag))) {
			if err != nil {
				w.removeFiles(ctx, tbl, files)
				return fmt.Errorf("table %s: write data files: %w", p.d.name(), err)
			}
			files = append(files, df)
		}
	}
	p.files, p.written = files, true
	if err := w.s.step(stepDataWritten); err != nil {
		p.ambiguous = true
		return err
	}
	return nil
}

// commit makes one attempt at committing p's files up to pos. It reports
// done when the table holds them (this attempt's, or an earlier one whose
// outcome was unknown).
//
// The commits of the sink's writers to one table take turns on its mutex.
// A writer queues its commit before it waits for its turn, and whoever
// gets the mutex makes every queued commit in one snapshot (commitGroup):
// partitions whose flushes come together cost the catalog one commit, not
// one each, and the table one snapshot.
func (w *writer) commit(ctx context.Context, p *part, pos *sinks.Position) (bool, error) {
	d := p.d
	req := &commitReq{key: w.key, watermark: p.watermark, pos: pos, files: p.files, ambiguous: p.ambiguous, Outcome: commit.NewOutcome()}
	d.qmu.Lock()
	d.queued = append(d.queued, req)
	d.qmu.Unlock()
	if err := d.lock(ctx); err != nil {
		made, unknown := commit.Withdraw(&d.qmu, &d.queued, req, &req.Outcome)
		p.ambiguous = p.ambiguous || unknown
		if made {
			return req.OK, req.Err
		}
		return false, unreachable(err)
	}
	// Unless the writer that had the turn made (or refused) it, this one
	// makes what is queued, until its own commit is among what it made
	// (commitGroup leaves a second commit of one partition for later).
	for !req.Finished() {
		d.qmu.Lock()
		group := d.queued
		d.queued = nil
		if w.s.soloCommits {
			group, d.queued = []*commitReq{req}, slices.DeleteFunc(group, func(r *commitReq) bool { return r == req })
		}
		d.qmu.Unlock()
		w.s.commitGroup(ctx, d, group)
	}
	d.mu.Unlock()
	if req.Unknown {
		p.ambiguous = true
	}
	return req.OK, req.Err
}

// commitReq is a writer's commit as queued on its table.
type commitReq struct {
	key       string          // the partition's summary key
	watermark *sinks.Position // the writer's last commit to the table: its fence
	pos       *sinks.Position
	files     []ice.DataFile
	ambiguous bool // an earlier attempt's outcome is unknown
	// set by the writer that made the commit
	commit.Outcome
}

// commitGroup makes the queued commits of d's table in one snapshot: the
// files of them all, and a summary carrying each one's new watermark. A
// commit whose partition another writer has committed since its fence
// (a stale owner) is refused alone, with sinks.ErrFenced. The snapshot
// asserts the table's current one: a lost race, or a failure, is every
// member's, and each writer tries again on its own. Of two commits of one
// partition (a stale writer and the new owner's in one process), the
// second is put back in the queue, to be judged on the metadata this
// commit makes, as if they had taken turns. The caller holds d.mu.
func (s *sink) commitGroup(ctx context.Context, d *dest, group []*commitReq) {
	tbl := d.tbl.Load()
	meta := tbl.Metadata()
	var members, later []*commitReq
	for _, r := range group {
		if slices.ContainsFunc(members, func(m *commitReq) bool { return m.key == r.key }) {
			later = append(later, r)
			continue
		}
		cur, err := watermarkOf(meta, r.key)
		switch {
		case err != nil:
			r.Finish(false, false, err)
		case samePosition(cur, r.watermark):
			members = append(members, r)
		case r.ambiguous && cur != nil && cur.SequenceNumber == r.pos.SequenceNumber:
			r.Finish(true, false, nil) // an earlier attempt whose answer was lost went through
		default:
			r.Finish(false, false, fmt.Errorf("another writer committed this partition to table %s up to %s since this one's watermark %s: %w",
				d.name(), describe(cur), describe(r.watermark), sinks.ErrFenced))
		}
	}
	if len(later) > 0 {
		d.qmu.Lock()
		d.queued = append(later, d.queued...)
		d.qmu.Unlock()
	}
	if len(members) == 0 {
		return
	}
	fail := func(unknown bool, err error) {
		for _, r := range members {
			r.Finish(false, unknown, err)
		}
	}
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		fail(false, err)
		return
	}
	props := carriedProps(meta)
	var files []ice.DataFile
	for _, r := range members {
		props[r.key] = formatPosition(r.pos)
		files = append(files, r.files...)
	}
	if err := addSnapshot(ctx, tx, files, props); err != nil {
		fail(false, err)
		return
	}
	if err := s.step(stepManifestWritten); err != nil {
		fail(true, err)
		return
	}
	if err := s.step(stepBeforeSwap); err != nil {
		fail(true, err)
		return
	}
	newTbl, err := tx.Commit(ctx)
	if err != nil {
		// A lost race (lostRace: the catalog refused the commit on the
		// table's state) made nothing. Anything else may have been
		// applied: a REST catalog may time out after applying the
		// commit. The next attempt finds out from the metadata; the
		// files are kept.
		fail(!lostRace(err), fmt.Errorf("commit to table %s: %w", d.name(), err))
		return
	}
	d.tbl.Store(newTbl)
	if err := s.step(stepAfterSwap); err != nil {
		fail(true, err)
		return
	}
	for _, r := range members {
		r.Finish(true, false, nil)
	}
}

// addSnapshot adds to tx a snapshot of files with the summary props. A
// snapshot without files (only events without rows: dead letters, empty
// arrays; a replay's mark) still moves the watermarks, or the branch.
func addSnapshot(ctx context.Context, tx *table.Transaction, files []ice.DataFile, props ice.Properties) error {
	var err error
	if len(files) > 0 {
		err = tx.AddDataFiles(ctx, files, props, table.WithoutDuplicateCheck(), table.WithoutAutoNameMapping())
	} else {
		err = tx.AddFiles(ctx, nil, props, false)
	}
	if err != nil {
		return fmt.Errorf("prepare the snapshot: %w", err)
	}
	return nil
}

func samePosition(a, b *sinks.Position) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.SequenceNumber == b.SequenceNumber
}

func describe(p *sinks.Position) string {
	if p == nil {
		return "none"
	}
	return p.String()
}

// Close drops the gathered rows, and the files of a commit that was not
// made. Close is idempotent.
func (w *writer) Close(ctx context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	for _, p := range w.all {
		w.discardPart(ctx, p, p.d.current())
	}
	w.release()
	return nil
}

// release frees the row builders.
func (w *writer) release() {
	for _, p := range w.all {
		p.rows.release()
	}
}

// discard drops the open commit, in every table: its rows and, unless a
// commit attempt of them had an unknown outcome, its data files. The
// caller holds no table's mutex.
func (w *writer) discard(ctx context.Context) {
	for _, p := range w.all {
		w.discardPart(ctx, p, p.d.current())
	}
	w.open, w.held = false, 0
}

func (w *writer) discardPart(ctx context.Context, p *part, tbl *table.Table) {
	if p.written && !p.ambiguous {
		w.removeFiles(ctx, tbl, p.files)
	}
	if p.record == nil && p.rows.rows > 0 {
		p.record = p.rows.record() // empties the builder
	}
	p.reset()
}

// reset forgets the part's commit after it was made or dropped.
func (p *part) reset() {
	if p.record != nil {
		p.record.Release()
		p.record = nil
	}
	p.written, p.files, p.ambiguous = false, nil, false
}

// removeFiles removes data files that no commit references.
func (w *writer) removeFiles(ctx context.Context, tbl *table.Table, files []ice.DataFile) {
	if len(files) == 0 {
		return
	}
	fsys, err := tbl.FS(ctx)
	if err != nil {
		w.log.Warn("removing uncommitted data files", "err", err)
		return
	}
	for _, f := range files {
		if err := fsys.Remove(f.FilePath()); err != nil && !isNotExist(err) {
			w.log.Warn("removing uncommitted data file", "file", f.FilePath(), "err", err)
		}
	}
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// step runs the test hook at a step of a commit.
func (s *sink) step(name string) error {
	if s.hook == nil {
		return nil
	}
	if err := s.hook(name); err != nil {
		return &commit.StepError{Step: name, Err: err}
	}
	return nil
}

// backoff waits before commit attempt n+1: a little longer each time, with
// jitter, so that writers of several processes stop colliding.
func backoff(ctx context.Context, n int) error {
	d := time.Duration(n*n) * 10 * time.Millisecond
	d = min(d, 2*time.Second)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
