package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/sinks"
)

// Rows the server refuses.
//
// Some rules only the server can check: CHECK constraints, NOT NULL on a
// column the mapping lets be null, unique indexes, foreign keys,
// exclusion constraints, triggers that raise. A COPY or merge that meets
// one such row fails whole. The writer then finds the refused rows by
// bisection in a probe transaction that is rolled back: each half is
// copied (and merged) under a savepoint, a half that fails is split again,
// and a single row that fails is refused with the server's message. Rows
// that succeed stay applied while the next ones are probed, so a row that
// clashes with an earlier row of the same batch (a duplicate key) is the
// one refused, as it would be in sequence order. Deferred constraints are
// made immediate in the probe, so that each row answers for itself.
//
// Flush then returns a *sinks.RejectedError naming those events and
// commits nothing; the runner dead-letters them (DeadLetter buffers them)
// and flushes again, which commits the other rows, the dead letters and a
// watermark that covers them in one transaction. A replay therefore neither
// rewrites nor re-refuses them. In upsert mode a refused newest event of a
// key lets the key's previous event in the flush take its place (the next
// commit collapses again without the refused one); if that one is refused
// too, the next round finds it.
//
// A probe costs about 2·k·log2(n) statements for k refused rows among n,
// on one connection, and keeps no more than the buffered rows in memory.

// poisonCode reports whether a SQLSTATE means the server refuses the row
// itself, the same way on every attempt: class 22 (data exception: a value
// out of range, too long, invalid for its type) and class 23 (integrity
// constraint violation: NOT NULL, foreign key, unique, CHECK, exclusion),
// and 54000 (program_limit_exceeded: an index row or a row too big).
// 22P04 (bad_copy_file_format) is not: it would mean the sink's own COPY
// encoding is wrong, which no event should pay for.
func poisonCode(code string) bool {
	switch {
	case code == "22P04":
		return false
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"), code == "54000":
		return true
	}
	return false
}

// poisonErr returns the server error in err if it refuses a row, else nil.
func poisonErr(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && poisonCode(pgErr.Code) {
		return pgErr
	}
	return nil
}

// refusal is the reason stored with a refused row: the server's message,
// its SQLSTATE, the constraint, and the detail (which row, which key).
func refusal(e *pgconn.PgError) error {
	var b strings.Builder
	b.WriteString("refused by PostgreSQL: ")
	b.WriteString(e.Message)
	fmt.Fprintf(&b, " (SQLSTATE %s", e.Code)
	if e.ConstraintName != "" {
		fmt.Fprintf(&b, ", constraint %s", e.ConstraintName)
	}
	b.WriteString(")")
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return errors.New(b.String())
}

// keptEvent is what a dead letter needs of a buffered row's event. The body
// is copied into the writer's raw buffer, one append per event: the runner
// may reuse the event's memory after Write.
type keptEvent struct {
	enqueued     time.Time
	partitionKey *string
	contentType  *string
	properties   map[string]any
	body         [2]int // w.raw[body[0]:body[1]]
}

// keep copies what a dead letter of ev needs: the event as received
// (sinks.Event.Received: an Avro event's bytes, not their JSON). Strings
// are immutable and kept as they are; the properties map is copied (its
// values are not).
func (w *writer) keep(ev *sinks.Event) keptEvent {
	body := ev.Body
	if ev.RawBody != nil {
		body = ev.RawBody
	}
	start := len(w.raw)
	w.raw = append(w.raw, body...)
	k := keptEvent{enqueued: ev.EnqueuedTime, partitionKey: ev.PartitionKey, contentType: ev.ContentType,
		body: [2]int{start, len(w.raw)}}
	if len(ev.Properties) > 0 {
		k.properties = maps.Clone(ev.Properties)
	}
	return k
}

// rejectedRow is a row the server refused, waiting for DeadLetter.
type rejectedRow struct {
	pos sinks.Position
	ev  keptEvent
	err error
}

// rejectedError reports the rows held apart.
func (w *writer) rejectedError() error {
	rej := make([]sinks.RejectedEvent, len(w.rejected))
	for i, r := range w.rejected {
		k := &r.ev
		rej[i] = sinks.RejectedEvent{Err: r.err, Event: sinks.Event{
			Partition: w.partition, SequenceNumber: r.pos.SequenceNumber, Offset: r.pos.Offset,
			EnqueuedTime: k.enqueued, PartitionKey: k.partitionKey, ContentType: k.contentType,
			Properties: k.properties, Body: w.raw[k.body[0]:k.body[1]:k.body[1]],
		}}
	}
	return w.errorf("flush: %w", &sinks.RejectedError{Rejected: rej})
}

// unreject forgets the refused row of seq, now that it is a dead letter.
func (w *writer) unreject(seq int64) {
	w.rejected = slices.DeleteFunc(w.rejected, func(r rejectedRow) bool { return r.pos.SequenceNumber == seq })
}

// sortRows puts the buffered rows back in sequence order after a collapse.
func (w *writer) sortRows() {
	if w.s.upsert {
		for _, b := range w.bufs {
			slices.SortFunc(b.rows[:b.n], func(x, y bufRow) int { return cmp.Compare(x.pos.SequenceNumber, y.pos.SequenceNumber) })
		}
	}
}

// isolate finds the buffered rows the server refuses (see the top of this
// file), moves them from the buffer to w.rejected, and reports whether it
// found any. It changes nothing in the database.
func (w *writer) isolate(ctx context.Context) (found bool, err error) {
	s := w.s
	w.applied()
	defer w.sortRows() // whatever happens, the buffer goes back to sequence order
	conn, release, err := s.acquire(ctx)
	if err != nil {
		return false, err
	}
	failed := true
	defer func() { release(failed) }()
	begin := &pgx.Batch{}
	begin.Queue("BEGIN")
	begin.Queue("SET CONSTRAINTS ALL IMMEDIATE")
	if _, err := runBatch(ctx, conn, begin, []string{"begin", "set constraints"}); err != nil {
		return false, err
	}
	refused := map[int64]error{}
	for _, b := range w.bufs {
		err = w.bisect(ctx, conn, b, b.rows[:len(b.applied)+len(b.deletes)], func(r *bufRow, e *pgconn.PgError) {
			reason := refusal(e)
			if s.sel != nil {
				reason = fmt.Errorf("table %s: %w", b.d.name, reason)
			}
			refused[r.pos.SequenceNumber] = reason
		})
		if err != nil {
			return false, err
		}
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		return false, fmt.Errorf("rollback: %w", err)
	}
	failed = false
	w.sortRows()
	if len(refused) == 0 {
		return false, nil
	}
	for _, b := range w.bufs {
		keep := 0
		for i := range b.n {
			r := &b.rows[i]
			if err, ok := refused[r.pos.SequenceNumber]; ok {
				w.rejected = append(w.rejected, rejectedRow{pos: r.pos, ev: r.ev, err: err})
				clear(r.vals)
				continue
			}
			b.rows[keep], b.rows[i] = b.rows[i], b.rows[keep]
			keep++
		}
		b.n = keep
	}
	slices.SortFunc(w.rejected, func(x, y rejectedRow) int { return cmp.Compare(x.pos.SequenceNumber, y.pos.SequenceNumber) })
	// The rows of an exploded event go with it: one refused element
	// dead-letters the event once, with all its rows held back.
	w.rejected = slices.CompactFunc(w.rejected, func(x, y rejectedRow) bool { return x.pos.SequenceNumber == y.pos.SequenceNumber })
	// The logger already names the connector (sinks.Info.Logger).
	w.s.log.Warn("rows refused by the server; dead-lettering them", "partition", w.partition, "count", len(refused))
	return true, nil
}

// bisect applies rows in order under savepoints, splitting a part the
// server refuses until single rows remain, and calls refuse for each of
// those. Any other failure ends it.
func (w *writer) bisect(ctx context.Context, conn *pgx.Conn, b *tableBuf, rows []bufRow, refuse func(*bufRow, *pgconn.PgError)) error {
	if len(rows) == 0 {
		return nil
	}
	err := w.probe(ctx, conn, b, rows)
	if err == nil {
		return nil
	}
	pgErr := poisonErr(err)
	if pgErr == nil {
		return err
	}
	if len(rows) == 1 {
		refuse(&rows[0], pgErr)
		return nil
	}
	mid := len(rows) / 2
	if err := w.bisect(ctx, conn, b, rows[:mid], refuse); err != nil {
		return err
	}
	return w.bisect(ctx, conn, b, rows[mid:], refuse)
}

// probe applies rows under a savepoint: kept when they all pass, rolled
// back when the server refuses one.
func (w *writer) probe(ctx context.Context, conn *pgx.Conn, b *tableBuf, rows []bufRow) error {
	s, d := w.s, b.d
	if _, err := conn.Exec(ctx, "SAVEPOINT ehsink_probe"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	err := func() error {
		if s.upsert {
			// A part's deletes go first; the split only permutes the
			// part, which isolate sorts back with the rest of the buffer.
			merges := []merge{{b: b, rows: rows}}
			if d.sqlDelete != "" {
				ups, dels := splitDeletes(rows)
				merges = merges[:0]
				if len(dels) > 0 {
					merges = append(merges, merge{b: b, rows: dels, del: true})
				}
				if len(ups) > 0 {
					merges = append(merges, merge{b: b, rows: ups})
				}
			}
			_, err := w.upsert(ctx, conn, merges, false)
			return err
		}
		if err := b.enc.copyRows(ctx, conn, d.target, d.r.copyCols, d.sqlDescribeCopy, d.sqlCopy, rows); err != nil {
			return fmt.Errorf("copy: %w", err)
		}
		return nil
	}()
	end := "RELEASE SAVEPOINT ehsink_probe"
	if err != nil {
		end = "ROLLBACK TO SAVEPOINT ehsink_probe; RELEASE SAVEPOINT ehsink_probe"
	}
	if _, eerr := conn.Exec(ctx, end); eerr != nil {
		return errors.Join(err, fmt.Errorf("end savepoint: %w", eerr))
	}
	return err
}
