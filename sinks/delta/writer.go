package delta

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/table/commit"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// writer writes one partition: the data files of the open commit grow
// with each Write, and Flush commits them with the partition's txn. It is
// used by one goroutine at a time, as sinks.Writer says.
type writer struct {
	s         *sink
	log       *slog.Logger
	partition string
	app       string // the partition's txn appId
	// watermark is the partition's txn version as this writer last saw it
	// (at Open, then its own commits): the fence of its next commit.
	watermark *sinks.Position
	// The open commit: the events taken since the last commit.
	open     bool
	first    int64
	last     int64
	lastOff  string
	openedAt time.Time
	files    []*dataFile // one per partition folder
	rows     int64
	bytes    int64
	// written says the files are stored (adds holds their actions): a
	// retried Flush only retries the commit. ambiguous says a commit of
	// them may have been made, its answer lost: its files are kept.
	written   bool
	adds      []deltalog.Add
	ambiguous bool
	closed    bool
	// dl is the partition's writer of the dead-letter table; nil in that
	// table's own writers.
	dl *writer
	// scratch, reused across Writes
	vals, dvals []any
}

var (
	_ sinks.Writer       = (*writer)(nil)
	_ sinks.Batcher      = (*writer)(nil)
	_ sinks.DeadLetterer = (*writer)(nil)
)

// dataFile is one data file of the open commit: the rows of one set of
// partition values.
type dataFile struct {
	dir     string             // the partition folder, "" or ending in /
	values  map[string]*string // the partition values
	buf     bytes.Buffer
	pw      *pq.GenericWriter[any]
	pending []pq.Row // the rows of the current Write, written at its end
	n       int64
	stats   []*colStats
	// rgBytes estimates the rows buffered since the last row group.
	rgBytes int64
}

// rowGroupBytes is the estimated size at which a data file's buffered
// rows are written out as a row group: encoding and compression then
// happen as events arrive, not all at the commit, and the buffer holds
// compressed bytes (the parquet sink's default row_group_size).
const rowGroupBytes = 32 << 20

// Write maps each event to rows and adds them to the data file of their
// partition values. An event that does not map (a missing field, a value
// of the wrong type) is reported in a *sinks.BatchError and not written;
// an exploded element that does not map fails the event and its other
// rows are kept. The runner dead-letters what failed.
func (w *writer) Write(ctx context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	if w.written {
		// A Flush failed after the files were stored; the runner flushes
		// again before it writes more (a failed Flush keeps what was
		// written), so new rows have no file to go to.
		return fmt.Errorf("connector %q partition %s: table %s: write after a failed flush; flush again first", w.s.info.Connector, w.partition, w.s.cfg.Table)
	}
	var failed []sinks.EventError
	var skipped int
	for i := range events {
		e := &events[i]
		if w.covered(e.SequenceNumber) {
			// The contract says this does not happen; if it does, writing
			// it again would be a duplicate. The dead-letter table's
			// writer meets it by design: the letters of a replayed flush;
			// so does a route's table that committed before a table
			// behind it (routed.go).
			if w.s.cfg.letters {
				w.log.Info("skipping a dead letter the dead-letter table holds", "seq", e.SequenceNumber)
			} else if w.s.cfg.routed {
				skipped++ // a whole replayed batch: one line, below
			} else {
				w.log.Warn("skipping event already taken", "seq", e.SequenceNumber)
			}
			continue
		}
		if err := w.writeEvent(e); err != nil {
			failed = append(failed, sinks.EventError{Index: i, Err: err})
		}
		if !w.open {
			w.open, w.first, w.openedAt = true, e.SequenceNumber, w.s.now()
		}
		w.last, w.lastOff = e.SequenceNumber, e.Offset
	}
	if skipped > 0 {
		w.log.Info("skipping events this route's table holds", "events", skipped, "watermark", describe(w.watermark))
	}
	if err := w.writeRows(); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// writeRows writes the rows of the events mapped since the last call
// into their data files.
func (w *writer) writeRows() error {
	for _, f := range w.files {
		if len(f.pending) == 0 {
			continue
		}
		if _, err := f.pw.WriteRows(f.pending); err != nil {
			return fmt.Errorf("connector %q partition %s: table %s: write rows: %w", w.s.info.Connector, w.partition, w.s.cfg.Table, err)
		}
		clear(f.pending)
		f.pending = f.pending[:0]
		if f.rgBytes >= w.s.rowGroup {
			if err := f.pw.Flush(); err != nil {
				return fmt.Errorf("connector %q partition %s: table %s: write a row group: %w", w.s.info.Connector, w.partition, w.s.cfg.Table, err)
			}
			f.rgBytes = 0
		}
	}
	return nil
}

// take adds e to the open commit without rows, unless the commit's files
// are stored already or e is covered: the commit's txn then covers e
// all the same, so the table's watermark moves past it.
func (w *writer) take(e *sinks.Event) {
	if w.written || w.covered(e.SequenceNumber) {
		return
	}
	if !w.open {
		w.open, w.first, w.openedAt = true, e.SequenceNumber, w.s.now()
	}
	w.last, w.lastOff = e.SequenceNumber, e.Offset
}

// covered reports whether seq is at or below what was taken or committed.
func (w *writer) covered(seq int64) bool {
	if w.open {
		return seq <= w.last
	}
	return w.watermark != nil && seq <= w.watermark.SequenceNumber
}

// writeEvent adds the rows of e to the open commit; an error is the
// event's.
func (w *writer) writeEvent(e *sinks.Event) error {
	rows, err := w.s.mapper.Rows(e)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols := w.s.cfg.Columns
	if cap(w.vals) < len(cols) {
		w.vals, w.dvals = make([]any, len(cols)), make([]any, len(w.s.dataIdx))
	}
	vals, dvals := w.vals[:len(cols)], w.dvals[:len(w.s.dataIdx)]
	var first error
	for j := range rows.Len() {
		err := rows.Map(j, vals)
		var row pq.Row
		if err == nil {
			for k, i := range w.s.dataIdx {
				dvals[k] = vals[i]
			}
			row, err = w.s.data.AppendRow(make(pq.Row, 0, len(dvals)), dvals)
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
		f := w.file(vals)
		f.pending = append(f.pending, row)
		f.n++
		for k, v := range dvals {
			f.stats[k].add(v)
			n := valueSize(v)
			w.bytes += n
			f.rgBytes += n
		}
		w.rows++
	}
	return first
}

// valueSize estimates a value's size in a row group, for max_bytes.
func valueSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x)) + 4
	case []byte:
		return int64(len(x)) + 4
	}
	return 8
}

// file returns the data file of the partition values of the mapped row
// vals, starting it if needed.
func (w *writer) file(vals []any) *dataFile {
	dir := ""
	for _, p := range w.s.parts {
		dir += partitionDir(p.name, p.value(vals))
	}
	for _, f := range w.files {
		if f.dir == dir {
			return f
		}
	}
	f := &dataFile{dir: dir, values: map[string]*string{}}
	for _, p := range w.s.parts {
		v := p.value(vals)
		f.values[p.name] = &v
	}
	for _, i := range w.s.dataIdx {
		f.stats = append(f.stats, newColStats(w.s.cfg.Columns[i]))
	}
	// Every file gets a new Parquet writer: parquet-go v0.32.0's Reset
	// leaves path_in_schema empty in the files written after it
	// (parquet-go/parquet-go#602), which Spark and hyparquet refuse.
	f.pw = pq.NewGenericWriter[any](&f.buf, w.s.wopts...)
	w.files = append(w.files, f)
	return f
}

// value is the serialized partition value of a mapped row (partition
// columns are not nullable): "Partition Value Serialization" of the
// protocol, a date as YYYY-MM-DD.
func (p partitionSpec) value(vals []any) string {
	v := vals[p.col]
	switch x := v.(type) {
	case time.Time:
		return x.UTC().Format(time.DateOnly)
	case string:
		return x
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

// partitionDir is the folder of one partition value, Hive style
// (col=value/), with every byte but letters, digits and . _ - escaped as
// %XX: a value cannot climb out of the table or name a hidden folder.
func partitionDir(col, value string) string {
	var b strings.Builder
	b.WriteString(col)
	b.WriteByte('=')
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	b.WriteByte('/')
	return b.String()
}

// FlushDue reports whether the open commit should be made: it has
// max_rows rows, their estimated size reached max_bytes, or its first
// event was taken max_age ago.
func (w *writer) FlushDue(now time.Time) bool {
	if !w.open || w.closed {
		return false
	}
	c := &w.s.cfg
	return w.rows >= c.MaxRows || w.bytes >= int64(c.MaxBytes) || !now.Before(w.openedAt.Add(c.MaxAge))
}

// Flush commits the open commit as one table version: it stores the
// data files (Parquet, with statistics in their add actions), then
// creates the next commit file, only if absent, with their add actions,
// the partition's txn (version: the last sequence number taken) and
// commitInfo. When another writer created that version first, the log is
// read again: if the partition's txn moved past what this writer last
// saw, another owner committed it and this one is stale: it removes its
// files and returns sinks.ErrFenced. Otherwise it commits at the next
// version with the same files. A failed Flush keeps the files; calling
// Flush again retries the commit.
func (w *writer) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	if !w.open {
		return w.watermark, nil
	}
	fail := func(err error) (*sinks.Position, error) {
		return nil, fmt.Errorf("connector %q partition %s seq %d..%d: table %s: %w", w.s.info.Connector, w.partition, w.first, w.last, w.s.cfg.Table, err)
	}
	pos := &sinks.Position{SequenceNumber: w.last, Offset: w.lastOff}
	if w.dl != nil && w.dl.open {
		// The letters first: a failure after them replays the flush,
		// whose letters their table's txn then covers.
		if _, err := w.dl.Flush(ctx); err != nil {
			if errors.Is(err, sinks.ErrFenced) {
				w.discard(ctx)
			}
			return fail(fmt.Errorf("dead letters: %w", err))
		}
	}
	if !w.written {
		if err := w.writeFiles(ctx); err != nil {
			return fail(err)
		}
	}
	ok, err := w.commit(ctx, pos)
	if errors.Is(err, sinks.ErrFenced) {
		w.discard(ctx)
		return fail(err)
	}
	if !ok {
		return fail(err)
	}
	w.log.Info("delta commit", "rows", w.rows, "files", len(w.adds), "first_seq", w.first, "last_seq", w.last)
	w.watermark = pos
	w.reset()
	return pos, nil
}

// writeFiles closes the data files and stores them under fresh names.
// Stored files no commit names are invisible to readers, who read only
// the files the log adds.
func (w *writer) writeFiles(ctx context.Context) error {
	var adds []deltalog.Add
	for _, f := range w.files {
		if f.n == 0 {
			continue
		}
		if err := f.pw.Close(); err != nil {
			return fmt.Errorf("data file: %w", err)
		}
		name := dataFileName(f.dir, w.s.tag, w.s.cfg.Compression)
		if err := w.s.store.Put(ctx, name, f.buf.Bytes()); err != nil {
			w.removeFiles(ctx, adds)
			return fmt.Errorf("data file %s: %w", name, err)
		}
		adds = append(adds, deltalog.Add{
			Path:             (&url.URL{Path: name}).EscapedPath(),
			PartitionValues:  f.values,
			Size:             int64(f.buf.Len()),
			ModificationTime: w.s.now().UnixMilli(),
			DataChange:       true,
			Stats:            statsJSON(f.n, f.stats),
		})
		f.buf = bytes.Buffer{}
	}
	w.adds, w.written = adds, true
	return w.s.step(stepDataWritten)
}

// commit makes the commit of the stored files up to pos, through the
// sink's queue. It reports whether the table holds them.
//
// The commits of the sink's writers take turns on the sink's mutex. A
// writer queues its commit before it waits for its turn, and whoever gets
// the mutex makes every queued commit in one table version
// (commitGroup): partitions whose flushes come together cost one commit
// file, not one each.
func (w *writer) commit(ctx context.Context, pos *sinks.Position) (bool, error) {
	s := w.s
	req := &commitReq{app: w.app, watermark: w.watermark, pos: pos, adds: w.adds, ambiguous: w.ambiguous, Outcome: commit.NewOutcome()}
	s.qmu.Lock()
	s.queue = append(s.queue, req)
	s.qmu.Unlock()
	if s.queued != nil {
		s.queued()
	}
	if err := commit.LockTurn(ctx, &s.mu); err != nil {
		made, unknown := commit.Withdraw(&s.qmu, &s.queue, req, &req.Outcome)
		w.ambiguous = w.ambiguous || unknown
		if made {
			return req.OK, req.Err
		}
		return false, sinks.Transient(fmt.Errorf("waiting for the turn to commit: %w", err))
	}
	for !req.Finished() {
		s.qmu.Lock()
		group := s.queue
		s.queue = nil
		s.qmu.Unlock()
		s.commitGroup(ctx, group)
	}
	s.mu.Unlock()
	if req.Unknown {
		w.ambiguous = true
	}
	return req.OK, req.Err
}

// commitReq is a writer's commit as queued on the sink.
type commitReq struct {
	// app is the txn appId the commit moves, fenced by watermark; ""
	// for a commit with no txn (a dead letter a replay stores again).
	app       string
	watermark *sinks.Position // the writer's fence
	pos       *sinks.Position
	adds      []deltalog.Add
	ambiguous bool // an earlier attempt's outcome is unknown
	// set by the writer that made the commit
	commit.Outcome
}

// maxCommitAttempts bounds the versions one flush tries after losing
// races; past it the flush fails (transient) and the runner retries.
const maxCommitAttempts = 20

// commitGroup makes the queued commits in one table version: the adds of
// them all, a txn for each, and commitInfo. A commit whose partition's
// txn moved since its fence (another owner committed: this one is stale)
// is refused alone, with sinks.ErrFenced. A lost race (the version
// exists) reads the winner's commits and tries the next version, judging
// each member again. Of two commits of one partition in the queue, the
// second waits for the next turn, to be judged on what the first made.
// The caller holds s.mu.
func (s *sink) commitGroup(ctx context.Context, group []*commitReq) {
	snap := s.snap
	// Writers of several processes that keep colliding spread out: the
	// project's one backoff, with full jitter.
	bo := backoff.Backoff{Initial: 5 * time.Millisecond, Max: time.Second}
	for attempt := 1; ; attempt++ {
		var members, later []*commitReq
		for _, r := range group {
			if r.app != "" && slices.ContainsFunc(members, func(m *commitReq) bool { return m.app == r.app }) {
				later = append(later, r)
				continue
			}
			cur, ok := snap.TxnVersion(r.app)
			switch {
			case r.app == "", !ok && r.watermark == nil, ok && r.watermark != nil && cur == r.watermark.SequenceNumber:
				members = append(members, r)
			case r.ambiguous && ok && cur == r.pos.SequenceNumber:
				r.Finish(true, false, nil) // an earlier attempt whose answer was lost went through
			default:
				r.Finish(false, false, fmt.Errorf("another writer committed this partition up to seq %d (txn %s) since this one's watermark %s: %w",
					cur, r.app, describe(r.watermark), sinks.ErrFenced))
			}
		}
		if len(later) > 0 {
			s.qmu.Lock()
			s.queue = append(later, s.queue...)
			s.qmu.Unlock()
		}
		if len(members) == 0 {
			return
		}
		fail := func(unknown bool, err error) {
			for _, r := range members {
				r.Finish(false, unknown, err)
			}
		}
		// Another engine may have upgraded the protocol since the table
		// was opened; a writer must not write a table whose features it
		// does not know.
		if err := deltalog.CheckWritable(snap.Protocol); err != nil {
			fail(false, fmt.Errorf("version %d: %w", snap.Version, err))
			return
		}
		// Another engine may have changed the schema or the partitioning:
		// files written for the old one may not fit the new one.
		if snap.Metadata != s.checked {
			if err := s.checkTable(snap); err != nil {
				fail(false, fmt.Errorf("version %d changed the table: %w", snap.Version, err))
				return
			}
			s.checked = snap.Metadata
		}
		now := s.now().UnixMilli()
		var actions []deltalog.Action
		var rows int
		for _, r := range members {
			if r.app != "" {
				actions = append(actions, deltalog.Action{Txn: &deltalog.Txn{AppID: r.app, Version: r.pos.SequenceNumber, LastUpdated: &now}})
				actions = append(actions, deltalog.Action{Txn: &deltalog.Txn{AppID: offsetApp(r.app), Version: offsetVersion(r.pos.Offset), LastUpdated: &now}})
			}
		}
		for _, r := range members {
			for i := range r.adds {
				actions = append(actions, deltalog.Action{Add: &r.adds[i]})
			}
			rows += len(r.adds)
		}
		actions = append(actions, deltalog.Action{CommitInfo: s.commitInfo("STREAMING UPDATE", map[string]any{"outputMode": "Append", "partitions": len(members)})})
		version := snap.Version + 1
		err := s.dlog.Commit(ctx, version, actions)
		if errors.Is(err, deltalog.ErrVersionExists) {
			if attempt >= maxCommitAttempts {
				fail(false, sinks.Transient(fmt.Errorf("lost the race for %d versions in a row: %w", attempt, err)))
				return
			}
			// Lost the race: read the winner's commits, then judge each
			// member again on them.
			if uerr := s.dlog.Update(ctx, snap); uerr != nil {
				fail(false, uerr)
				return
			}
			if err := wait(ctx, bo.Jittered()); err != nil {
				fail(false, err)
				return
			}
			group = members
			continue
		}
		if err != nil {
			// A Blob upload that timed out may have been applied: the next
			// attempt finds out from the partition's txn.
			fail(true, err)
			return
		}
		if err := snap.Apply(version, actions); err != nil {
			fail(true, err)
			return
		}
		if err := s.step(stepCommitted); err != nil {
			fail(true, err)
			return
		}
		if iv := int64(s.cfg.CheckpointInterval); version%iv == 0 {
			// A checkpoint only saves readers the replay: a failed one is
			// logged, and the next one covers this version too.
			if err := s.checkpoint(ctx, snap); err != nil {
				var injected *commit.StepError
				if errors.As(err, &injected) {
					fail(true, err)
					return
				}
				s.log.Warn("delta checkpoint failed", "version", version, "err", err)
			}
		}
		for _, r := range members {
			r.Finish(true, false, nil)
		}
		return
	}
}

// checkpoint writes the checkpoint of snap, then _last_checkpoint.
func (s *sink) checkpoint(ctx context.Context, snap *deltalog.Snapshot) error {
	lc, err := s.dlog.WriteCheckpoint(ctx, snap, s.now())
	if err != nil {
		return err
	}
	if err := s.step(stepCheckpointed); err != nil {
		return err
	}
	if err := s.dlog.SetLastCheckpoint(ctx, lc); err != nil {
		return err
	}
	// The log stays small: the entries the checkpoint covers go once
	// the table's delta.logRetentionDuration has passed (checkTable
	// checked that it parses).
	retention, _ := deltalog.LogRetention(snap.Metadata)
	n, err := s.dlog.Cleanup(ctx, s.now(), retention)
	if n > 0 {
		s.log.Info("delta log cleaned up", "removed", n, "retention", retention)
	}
	return err
}

func describe(p *sinks.Position) string {
	if p == nil {
		return "none"
	}
	return p.String()
}

// wait sleeps d, or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close drops the open commit and, unless a commit of them may have been
// made, its stored files. Close is idempotent.
func (w *writer) Close(ctx context.Context) error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.discard(ctx)
	if w.dl != nil {
		return w.dl.Close(ctx)
	}
	return nil
}

// discard drops the open commit: its rows and, unless a commit attempt
// of them had an unknown outcome, its stored files.
func (w *writer) discard(ctx context.Context) {
	if w.written && !w.ambiguous {
		w.removeFiles(ctx, w.adds)
	}
	w.reset()
}

// reset forgets the open commit after it was made or dropped.
func (w *writer) reset() {
	for _, f := range w.files {
		if !w.written {
			_ = f.pw.Close() // frees its buffers; the bytes are dropped
		}
	}
	w.files, w.adds, w.written, w.ambiguous, w.open, w.rows, w.bytes = nil, nil, false, false, false, 0, 0
}

// removeFiles removes stored data files no commit references.
func (w *writer) removeFiles(ctx context.Context, adds []deltalog.Add) {
	for _, a := range adds {
		name, err := url.PathUnescape(a.Path)
		if err == nil {
			err = w.s.store.Remove(ctx, name)
		}
		if err != nil {
			w.log.Warn("removing an uncommitted data file", "file", a.Path, "err", err)
		}
	}
}
