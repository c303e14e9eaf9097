package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/dedupe"
	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// maxFenceRetries bounds how often one Flush re-reads a watermark that
// keeps moving under it; another owner that keeps committing means this
// writer should give the partition up, and the runner retries later.
const maxFenceRetries = 16

// bufRow is one buffered row, the position of its event and what a dead
// letter needs of the event, should the server refuse the row.
type bufRow struct {
	vals []any
	pos  sinks.Position
	ev   keptEvent
	del  bool // a delete: vals holds the key columns and the sequence number only
}

// deadLetter is a buffered dead letter, copied out of the runner's memory.
type deadLetter struct {
	pos          sinks.Position
	enqueued     time.Time
	partitionKey *string
	contentType  *string
	properties   []byte // JSON, or nil
	body         []byte
	reason       string
	failedAt     time.Time
	revision     *string // the configuration revision that refused it, if known
}

// writer writes one partition. It is used by one goroutine at a time.
type writer struct {
	s         *sink
	partition string
	wm        *sinks.Position // the committed watermark, as last read or written
	// bufs are the buffered rows, one buffer per table, in the order of
	// their tables' ids (the order a flush writes them in, so that two
	// partitions' flushes take the tables' locks in one order).
	bufs []*tableBuf
	dead []deadLetter
	// rejected are rows the server refused, held apart until DeadLetter
	// receives them; Flush reports them until then.
	rejected []rejectedRow
	// skipped is the last event taken that writes nothing (a Debezium
	// tombstone): the flush moves the watermark over it.
	skipped *sinks.Position
	// trimming counts the events dropCovered took out since the last
	// commit; trimmed is what the last commit's count came to (Trimmed).
	trimming, trimmed int
	// raw holds the bodies of the buffered rows' events (keptEvent.body).
	raw    []byte
	closed bool
	// replay, when not 0, is the id of the dead letter whose event the
	// writer replays (deadletters.go): its commit marks the letter
	// instead of moving the watermark.
	replay int64
}

// tableBuf holds the buffered rows of one table.
type tableBuf struct {
	d      *dest
	rows   []bufRow // rows[:n] are buffered; the rest are spare buffers
	n      int
	keyBuf []byte
	enc    copyEncoder
	// applied is what the commit being run applies (see writer.applied):
	// the upserts (or appends); deletes are the deletes, which follow
	// them in rows.
	applied, deletes []bufRow
}

var _ sinks.DeadLetterer = (*writer)(nil)

// buf returns the buffer of d's table, adding it.
func (w *writer) buf(d *dest) *tableBuf {
	i := len(w.bufs)
	for i > 0 && w.bufs[i-1].d.id >= d.id {
		if w.bufs[i-1].d == d {
			return w.bufs[i-1]
		}
		i--
	}
	b := &tableBuf{d: d}
	w.bufs = slices.Insert(w.bufs, i, b)
	return b
}

// buffered returns the number of buffered rows.
func (w *writer) buffered() int {
	n := 0
	for _, b := range w.bufs {
		n += b.n
	}
	return n
}

// last returns the highest sequence number buffered, or -1.
func (w *writer) last() int64 {
	return w.newTarget().SequenceNumber
}

// Write maps and buffers events. Events the table already holds (at or
// below the watermark) and events already buffered are skipped, so a
// repeated Write is harmless. Events that do not convert are reported in a
// *sinks.BatchError; the others are taken.
func (w *writer) Write(ctx context.Context, events []sinks.Event) error {
	if w.closed {
		return sinks.ErrClosed
	}
	var failed []sinks.EventError
	last := w.last()
	for i := range events {
		ev := &events[i]
		if dedupe.Covers(w.wm, ev.SequenceNumber) || ev.SequenceNumber <= last {
			continue
		}
		if w.s.cfg.Format == cdc.FormatDebezium && cdc.IsTombstone(ev.Body) {
			last = ev.SequenceNumber
			w.skip(ev)
			continue
		}
		d, err := w.s.destOf(ctx, ev)
		if err != nil {
			// Looked into only on an error: the target of errors.As
			// escapes, an allocation per event otherwise.
			var evErr *eventError
			if errors.As(err, &evErr) {
				failed = append(failed, sinks.EventError{Index: i, Err: evErr.err})
				continue
			}
			return w.errorf("seq %d: %w", ev.SequenceNumber, err)
		}
		b := w.buf(d)
		if r := d.r; r.rules != nil {
			// A connector that deletes makes one row, or one delete,
			// per event (it does not explode).
			ncols := len(r.mapper.Columns())
			if b.n == len(b.rows) {
				b.rows = append(b.rows, bufRow{vals: make([]any, len(r.copyCols))})
			}
			row := &b.rows[b.n]
			op, err := r.rules.Map(ev, row.vals[:ncols])
			if err == nil && op != cdc.OpSkip {
				err = checkValues(d, row.vals[:ncols])
			}
			if err != nil {
				failed = append(failed, sinks.EventError{Index: i, Err: err})
				continue
			}
			last = ev.SequenceNumber
			if op == cdc.OpSkip {
				w.skip(ev)
				continue
			}
			row.vals[ncols] = ev.SequenceNumber
			row.pos, row.ev, row.del = ev.Position(), w.keep(ev), op == cdc.OpDelete
			b.n++
			continue
		}
		var moved bool
		if failed, moved = w.bufferRows(d, b, ev, i, failed); moved {
			last = ev.SequenceNumber
		}
	}
	if len(failed) > 0 {
		return &sinks.BatchError{Failed: failed}
	}
	return nil
}

// bufferRows buffers the rows event ev (events[i] of the Write) maps to,
// for a table without delete rules: one row, or one per element of an
// exploded array. It is Write's mapping step on its own so Write reads as
// skip, route, buffer. An element that does not convert is a failure of
// its own, appended to failed, and the event's other rows are taken. moved
// reports whether the watermark moves over ev: a row was buffered, or the
// array was empty. It allocates nothing beyond the rows it buffers.
func (w *writer) bufferRows(d *dest, b *tableBuf, ev *sinks.Event, i int, failed []sinks.EventError) (_ []sinks.EventError, moved bool) {
	r := d.r
	ncols := len(r.mapper.Columns())
	rows, err := r.mapper.Rows(ev)
	if err != nil {
		return append(failed, sinks.EventError{Index: i, Err: err}), false
	}
	var kept keptEvent // a value: a pointer to it would escape, an allocation per event
	haveKept := false
	for j := range rows.Len() {
		if b.n == len(b.rows) {
			b.rows = append(b.rows, bufRow{vals: make([]any, len(r.copyCols))})
		}
		row := &b.rows[b.n]
		if err := convert(d, rows, j, row.vals[:ncols]); err != nil {
			failed = append(failed, sinks.EventError{Index: i, Err: err})
			continue
		}
		if w.s.upsert {
			row.vals[ncols] = ev.SequenceNumber
		}
		row.pos = ev.Position()
		if !haveKept {
			kept, haveKept = w.keep(ev), true // once per event, shared by its rows
		}
		row.ev = kept
		b.n++
		moved = true
	}
	if rows.Len() == 0 { // an empty array: no row, and the watermark moves over it
		moved = true
		w.skip(ev)
	}
	rows.Close()
	return failed, moved
}

// skip takes ev as an event that writes nothing (a Debezium tombstone, an
// exploded empty array):
// the next flush moves the watermark over it.
func (w *writer) skip(ev *sinks.Event) {
	pos := ev.Position()
	w.skipped = &pos
}

// convert maps row j of an event into vals and applies what PostgreSQL
// adds to the mapping's rules: no NUL in text, no \u0000 in jsonb.
// (Decimals stay mapping.Decimal: the connections encode them with
// numericCodec.) A failure of an exploded element names the element.
func convert(d *dest, rows *mapping.Rows, j int, vals []any) error {
	if err := rows.Map(j, vals); err != nil {
		return err
	}
	if err := checkValues(d, vals); err != nil {
		if rows.Exploded() {
			return &mapping.ElementError{Index: j, Err: err}
		}
		return err
	}
	return nil
}

// checkValues applies PostgreSQL's rules to a mapped row: what no
// column can store (storable), then the lengths of d's columns.
func checkValues(d *dest, vals []any) error {
	if err := d.r.storable.check(vals); err != nil {
		return err
	}
	cols := d.r.mapper.Columns()
	for _, l := range d.charLimits {
		if s, ok := vals[l.index].(string); ok && !fitsChars(s, l.max) {
			return &mapping.ColumnError{Column: cols[l.index].Name,
				Err: fmt.Errorf("%d characters do not fit the column's limit of %d", utf8.RuneCountInString(s), l.max)}
		}
	}
	return nil
}

// storable checks the values PostgreSQL cannot store in a column of their
// mapping type, whatever the table: NUL in text, \u0000 in jsonb. The
// writer (checkValues) and `ehsink test` (TableShape's Check) run it.
type storable struct {
	cols mapping.Columns
	nul  []int // string columns
	json []int // json columns
}

func newStorable(cols mapping.Columns) storable {
	s := storable{cols: cols}
	for i, col := range cols {
		switch col.Type.Kind {
		case mapping.KindString:
			s.nul = append(s.nul, i)
		case mapping.KindJSON:
			s.json = append(s.json, i)
		}
	}
	return s
}

// check returns the problem of a mapped row, a *mapping.ColumnError.
func (s storable) check(vals []any) error {
	for _, i := range s.nul {
		if v, ok := vals[i].(string); ok && strings.IndexByte(v, 0) >= 0 {
			return &mapping.ColumnError{Column: s.cols[i].Name, Err: errors.New("text contains a NUL character, which PostgreSQL cannot store")}
		}
	}
	for _, i := range s.json {
		if j, ok := vals[i].(json.RawMessage); ok && bytes.Contains(j, []byte(`\u0000`)) {
			return &mapping.ColumnError{Column: s.cols[i].Name, Err: errors.New(`JSON contains \u0000, which jsonb cannot store`)}
		}
	}
	return nil
}

// charLimitCol is a mapped column with a length limit (varchar(n), char(n)).
type charLimitCol struct {
	index int // in the mapping's columns
	max   int // characters
}

// fitsChars reports whether PostgreSQL stores s in a column of at most max
// characters: longer strings are refused unless the excess is all spaces,
// which it trims.
func fitsChars(s string, max int) bool {
	if len(s) <= max { // bytes >= characters
		return true
	}
	n := 0
	for i := range s {
		if n == max {
			return strings.TrimRight(s[i:], " ") == ""
		}
		n++
	}
	return true
}

// DeadLetter buffers dead letters; the next Flush stores them in
// ehsink_dead_letters in the same transaction as the rows and the
// watermark. Letters the table already holds are skipped.
func (w *writer) DeadLetter(ctx context.Context, letters []sinks.DeadLetter) error {
	if w.closed {
		return sinks.ErrClosed
	}
	for i := range letters {
		l := &letters[i]
		if dedupe.Covers(w.wm, l.Event.SequenceNumber) {
			continue
		}
		d := deadLetter{
			pos:      l.Event.Position(),
			enqueued: l.Event.EnqueuedTime,
			body:     bytes.Clone(l.Event.Body),
			reason:   l.Reason,
			failedAt: l.FailedAt,
		}
		if d.failedAt.IsZero() {
			d.failedAt = time.Now()
		}
		if rev := deadletters.Revision(ctx); rev != "" {
			d.revision = &rev
		}
		// text and jsonb cannot hold NUL: a dead letter must not fail
		// for it, so it is replaced there by U+FFFD.
		if l.Event.PartitionKey != nil {
			k := strings.ReplaceAll(*l.Event.PartitionKey, "\x00", "\uFFFD")
			d.partitionKey = &k
		}
		if l.Event.ContentType != nil {
			ct := strings.ReplaceAll(*l.Event.ContentType, "\x00", "\uFFFD")
			d.contentType = &ct
		}
		if len(l.Event.Properties) > 0 {
			if p, err := json.Marshal(l.Event.Properties); err == nil {
				d.properties = bytes.ReplaceAll(p, []byte(`\u0000`), []byte(`\ufffd`))
			}
		}
		d.reason = strings.ReplaceAll(d.reason, "\x00", "\uFFFD")
		// Keep dead letters in sequence order for last().
		j := len(w.dead)
		for j > 0 && w.dead[j-1].pos.SequenceNumber > d.pos.SequenceNumber {
			j--
		}
		w.dead = append(w.dead, deadLetter{})
		copy(w.dead[j+1:], w.dead[j:])
		w.dead[j] = d
		w.unreject(d.pos.SequenceNumber)
	}
	return nil
}

// Flush commits the buffered rows and dead letters with the watermark in
// one transaction. On failure everything stays buffered for the retry.
func (w *writer) Flush(ctx context.Context) (*sinks.Position, error) {
	if w.closed {
		return nil, sinks.ErrClosed
	}
	if len(w.rejected) > 0 {
		return nil, w.rejectedError()
	}
	for attempt := 0; w.buffered() > 0 || len(w.dead) > 0 || w.skipped != nil; attempt++ {
		to, err := w.commit(ctx)
		if err == nil {
			w.wm = &to
			w.trimmed, w.trimming = w.trimming, 0
			w.reset()
			w.s.cleanTombstones(ctx, time.Now())
			break
		}
		w.sortRows() // a collapse (upsert) moved rows around
		if poisonErr(err) != nil {
			// A row the server refuses: find which, commit nothing, and
			// let the runner dead-letter it before the next attempt.
			found, ierr := w.isolate(ctx)
			switch {
			case ierr != nil:
				return nil, w.errorf("flush: %w; finding the refused rows: %w", err, classify(ierr))
			case found:
				return nil, w.rejectedError()
			}
		}
		if !errors.Is(err, errFenceLost) {
			w.s.dropIdleAfterLoss(err)
			return nil, w.errorf("flush: %w", classify(err))
		}
		if attempt == maxFenceRetries {
			return nil, w.errorf("flush: %w %d times in a row", err, attempt+1)
		}
		wm, err := w.s.readWatermark(ctx, w.partition)
		if err != nil {
			return nil, w.errorf("flush: re-read watermark: %w", err)
		}
		// the logger names the connector already
		w.s.log.Warn("watermark moved by another writer; dropping what it committed",
			"partition", w.partition, "read", seqOf(w.wm), "now", seqOf(wm))
		w.wm = wm
		w.dropCovered()
	}
	return clonePos(w.wm), nil
}

func seqOf(p *sinks.Position) any {
	if p == nil {
		return "none"
	}
	return p.SequenceNumber
}

func (w *writer) errorf(format string, args ...any) error {
	span := ""
	first, last := int64(-1), int64(-1)
	for _, b := range w.bufs {
		if b.n > 0 {
			if f := b.rows[0].pos.SequenceNumber; first < 0 || f < first {
				first = f
			}
			last = max(last, b.rows[b.n-1].pos.SequenceNumber)
		}
	}
	if first >= 0 {
		span = fmt.Sprintf(" seq %d..%d", first, last)
	}
	table := w.s.wmTable
	if table == routesTableName {
		table = "(routed)"
	}
	return fmt.Errorf("postgres: connector %q table %s partition %s%s: "+format,
		append([]any{w.s.info.Connector, table, w.partition, span}, args...)...)
}

// reset empties the buffers, keeping their memory.
func (w *writer) reset() {
	for _, b := range w.bufs {
		for i := range b.n {
			clear(b.rows[i].vals) // let the values go
			b.rows[i].ev = keptEvent{}
		}
		b.n = 0
		b.applied, b.deletes = nil, nil
	}
	w.skipped = nil
	clear(w.dead)
	w.dead = w.dead[:0]
	w.raw = w.raw[:0]
	if cap(w.raw) > maxKeptCopyBuf {
		w.raw = nil
	}
}

// dropCovered removes buffered rows and letters at or below the watermark.
func (w *writer) dropCovered() {
	// An event may be several rows (routes, explode) or a dead letter; it
	// is counted once, by its sequence number. This runs only when
	// another writer committed the partition, so the set costs nothing
	// on the hot path.
	events := map[int64]struct{}{}
	covered := func(pos sinks.Position) bool {
		if dedupe.Covers(w.wm, pos.SequenceNumber) {
			events[pos.SequenceNumber] = struct{}{}
			return true
		}
		return false
	}
	for _, b := range w.bufs {
		keep := 0
		for i := range b.n {
			if !covered(b.rows[i].pos) {
				b.rows[keep], b.rows[i] = b.rows[i], b.rows[keep]
				keep++
			}
		}
		b.n = keep
	}
	if w.skipped != nil && covered(*w.skipped) {
		w.skipped = nil
	}
	dead := w.dead[:0]
	for _, d := range w.dead {
		if !covered(d.pos) {
			dead = append(dead, d)
		}
	}
	w.dead = dead
	rejected := w.rejected[:0]
	for _, r := range w.rejected {
		if !covered(r.pos) {
			rejected = append(rejected, r)
		}
	}
	w.rejected = rejected
	w.trimming += len(events)
}

// Trimmed implements sinks.Trimmer.
func (w *writer) Trimmed() int { return w.trimmed }

// newTarget is the position the flush moves the watermark to: the
// highest buffered (sequence number -1 when nothing is).
func (w *writer) newTarget() sinks.Position {
	to := sinks.Position{SequenceNumber: -1}
	for _, b := range w.bufs {
		if b.n > 0 && b.rows[b.n-1].pos.SequenceNumber > to.SequenceNumber {
			to = b.rows[b.n-1].pos
		}
	}
	if k := len(w.dead); k > 0 && w.dead[k-1].pos.SequenceNumber > to.SequenceNumber {
		to = w.dead[k-1].pos
	}
	for _, r := range w.rejected {
		if r.pos.SequenceNumber > to.SequenceNumber {
			to = r.pos
		}
	}
	if w.skipped != nil && w.skipped.SequenceNumber > to.SequenceNumber {
		to = *w.skipped
	}
	return to
}

// commit runs one flush transaction.
func (w *writer) commit(ctx context.Context) (sinks.Position, error) {
	s := w.s
	to := w.newTarget()
	w.applied()
	conn, release, err := s.acquire(ctx)
	if err != nil {
		return to, err
	}
	failed := true
	defer func() { release(failed) }()
	// The fence first: it takes the watermark row's lock, so a second
	// owner waits here rather than after copying its rows. BEGIN and the
	// fence travel in one round trip, and so do the merge and COMMIT at
	// the end; a failed statement makes the server skip the rest of its
	// batch, and the failed flush closes the connection, which rolls the
	// transaction back.
	var sql string
	var args []any
	switch {
	case w.replay != 0:
		// A replay's fence is its letter, not the watermark, which it
		// leaves to the partition's owner: marking the letter in this
		// transaction takes its row's lock, and a letter another
		// replay marked first updates nothing (fence lost).
		sql, args = s.sqlMarkReplayed, []any{w.replay}
	case w.wm == nil:
		sql, args = s.sqlInsertWM, append(s.wmKey(w.partition), to.SequenceNumber, to.Offset)
	default:
		sql, args = s.sqlAdvanceWM, append(s.wmKey(w.partition), to.SequenceNumber, to.Offset, w.wm.SequenceNumber)
	}
	begin := &pgx.Batch{}
	begin.Queue("BEGIN")
	begin.Queue(sql, args...)
	stop := s.watchFence(ctx, conn.PgConn().PID(), w.partition)
	tag, err := runBatch(ctx, conn, begin, []string{"begin", "watermark"})
	stop()
	if err != nil {
		return to, err
	}
	// A replay marks its letter and the other letters of its event.
	if n := tag.RowsAffected(); n != 1 && (w.replay == 0 || n == 0) {
		if _, err := conn.Exec(ctx, "ROLLBACK"); err == nil {
			failed = false // a clean rollback: the connection is fine
		}
		return to, errFenceLost
	}
	if err := s.fault(faultBeforeCopy); err != nil {
		return to, err
	}
	for _, b := range w.bufs {
		if len(b.applied) == 0 || s.upsert {
			continue
		}
		if err := b.enc.copyRows(ctx, conn, b.d.target, b.d.r.copyCols, b.d.sqlDescribeCopy, b.d.sqlCopy, b.applied); err != nil {
			return to, fmt.Errorf("copy to %s: %w", b.d.name, err)
		}
	}
	if len(w.dead) > 0 {
		if _, err := conn.CopyFrom(ctx, s.deadLetters, deadLetterColumns(), &deadSource{w: w, i: -1}); err != nil {
			return to, fmt.Errorf("dead letters: %w", err)
		}
	}
	if err := s.fault(faultBeforeCommit); err != nil {
		return to, err
	}
	// The merges (upsert) travel with COMMIT.
	var merges []merge
	for _, b := range w.bufs {
		if len(b.deletes) > 0 {
			merges = append(merges, merge{b: b, rows: b.deletes, del: true})
		}
		if s.upsert && len(b.applied) > 0 {
			merges = append(merges, merge{b: b, rows: b.applied})
		}
	}
	if tag, err = w.upsert(ctx, conn, merges, true); err != nil {
		return to, err
	}
	if tag.String() != "COMMIT" {
		return to, fmt.Errorf("commit: %w", pgx.ErrTxCommitRollback)
	}
	failed = false
	return to, nil
}

// applied sets, for each table, the buffered rows a commit applies: all
// of them in append mode; in upsert mode the newest of each key, since
// only it matters and ON CONFLICT may not touch a row twice. The collapse
// moves the other rows behind the result, still within rows[:n], and
// leaves them out of sequence order until sortRows.
func (w *writer) applied() {
	for _, b := range w.bufs {
		b.applied, b.deletes = b.rows[:b.n], nil
		if w.s.upsert && len(b.applied) > 1 {
			b.keyBuf = b.keyBuf[:0]
			b.applied = dedupe.Collapse(b.applied, b.rowKey, func(r *bufRow) int64 { return r.pos.SequenceNumber })
		}
		if b.d.r.rules != nil {
			// The newest version of a key may be a delete.
			b.applied, b.deletes = splitDeletes(b.applied)
		}
	}
}

// runBatch sends b in one round trip and returns the command tag of its
// last statement, or the first error, prefixed with the name of its
// statement in names.
func runBatch(ctx context.Context, conn *pgx.Conn, b *pgx.Batch, names []string) (pgconn.CommandTag, error) {
	br := conn.SendBatch(ctx, b)
	var tag pgconn.CommandTag
	for i := range b.Len() {
		t, err := br.Exec()
		if err != nil {
			br.Close()
			return tag, fmt.Errorf("%s: %w", names[i], err)
		}
		tag = t
	}
	return tag, br.Close()
}

// rowKey encodes the key columns of a row as a map key. Values of one
// column share a Go type, so the encoding only has to be unambiguous
// across columns: each part is length-prefixed. The keys of one collapse
// are appended to one buffer and viewed as strings without copying: bytes
// once written are never changed while the collapse runs (growing the
// buffer leaves earlier keys in the old array), and the next collapse
// starts over only after the map of this one is gone.
func (t *tableBuf) rowKey(r *bufRow) string {
	b := t.keyBuf
	first := len(b)
	for _, i := range t.d.r.keyIdx {
		start := len(b)
		b = append(b, 0, 0, 0, 0)
		switch v := r.vals[i].(type) {
		case string:
			b = append(b, v...)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case int32:
			b = strconv.AppendInt(b, int64(v), 10)
		case []byte:
			b = append(b, v...)
		case [16]byte:
			b = append(b, v[:]...)
		case json.RawMessage:
			b = append(b, v...)
		default:
			b = fmt.Append(b, v)
		}
		n := len(b) - start - 4
		b[start], b[start+1], b[start+2], b[start+3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	}
	t.keyBuf = b
	return unsafe.String(&b[first], len(b)-first)
}

// Close abandons whatever was not flushed.
func (w *writer) Close(ctx context.Context) error {
	w.closed = true
	w.bufs, w.dead = nil, nil
	w.rejected, w.raw = nil, nil
	return nil
}

// rowSource feeds buffered rows to CopyFrom.
type rowSource struct {
	rows []bufRow
	i    int
}

func (r *rowSource) Next() bool             { r.i++; return r.i < len(r.rows) }
func (r *rowSource) Values() ([]any, error) { return r.rows[r.i].vals, nil }
func (r *rowSource) Err() error             { return nil }

// deadSource feeds buffered dead letters to CopyFrom.
type deadSource struct {
	w    *writer
	i    int
	vals []any
}

func (d *deadSource) Next() bool { d.i++; return d.i < len(d.w.dead) }
func (d *deadSource) Values() ([]any, error) {
	s, l := d.w.s, &d.w.dead[d.i]
	var props any
	if l.properties != nil {
		props = json.RawMessage(l.properties)
	}
	d.vals = append(d.vals[:0], s.info.Connector, s.info.Namespace, s.info.EventHub, s.info.ConsumerGroup, s.wmTable,
		d.w.partition, l.pos.SequenceNumber, l.pos.Offset, l.enqueued, l.partitionKey, l.contentType, props, l.body, l.reason, l.failedAt, l.revision)
	return d.vals, nil
}
func (d *deadSource) Err() error { return nil }

// closeTimeout bounds closing a connection after a failure.
const closeTimeout = time.Second

// dropIdleAfterLoss closes the pool's idle sessions when err says the
// server went away (a restart or a failover ends every session): the pool
// pings an idle session before handing it out only after a second of
// idleness, so the retry of the flush would otherwise meet a session the
// server had ended. New sessions are dialed as needed.
func (s *sink) dropIdleAfterLoss(err error) {
	var pgErr *pgconn.PgError
	lost := errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08"))
	if !lost && !errors.As(err, &pgErr) {
		lost = isTransient(err) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
	}
	if lost {
		s.pool.Reset()
	}
}

// acquire takes a pool connection for one transaction. release gives it
// back; after a failure it closes the connection first: after a failed COPY
// or COMMIT its state is not worth trusting, and a new one is cheap next to
// a retry (the pool drops a closed connection on Release).
func (s *sink) acquire(ctx context.Context) (conn *pgx.Conn, release func(failed bool), err error) {
	pooled, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	conn = pooled.Conn()
	return conn, func(failed bool) {
		if failed {
			// Bounded: the Terminate message of a connection whose path
			// is gone must not hold the partition.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
			conn.Close(cctx)
			cancel()
		}
		pooled.Release()
	}, nil
}
