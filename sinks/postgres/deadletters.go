package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/sinks"
)

// The sink's dead-letter store, as `ehsink deadletters` reads and replays
// it (package internal/deadletters).
//
// A replay runs the letter's event through a writer of the sink, so it
// maps, routes and checks the event as the running sink does, and commits
// its rows in one transaction with the letter marked replayed (replayed_at)
// instead of a watermark moved: the partition's owner keeps its
// watermark, and a replay stopped at any moment and run again finds the
// letters it committed marked. Upserts keep their ordering guard (the
// event's partition and sequence number), so a replayed old event does not
// overwrite a newer row of its key. An event that fails again is not
// written; its letter gets the new reason, time and revision.

var _ deadletters.Store = (*sink)(nil)

// letterKeyColumns are the columns that make letters the same event's: an
// exploded event with two bad elements has two letters.
const letterKeyColumns = `connector, namespace, eventhub, consumer_group, table_name, partition_id, sequence_number`

// markReplayedSQL marks letter $1, and the other letters of its event not
// yet replayed, as replayed: a commit of the event's rows writes them all.
func markReplayedSQL(t pgx.Identifier) string {
	return `UPDATE ` + t.Sanitize() + ` SET replayed_at = now() WHERE replayed_at IS NULL AND (` + letterKeyColumns + `) =
	(SELECT ` + letterKeyColumns + ` FROM ` + t.Sanitize() + ` WHERE id = $1)`
}

// failedAgainSQL stores the new reason ($2) and revision ($3) of letter $1,
// whose event a replay could not write.
func failedAgainSQL(t pgx.Identifier) string {
	return `UPDATE ` + t.Sanitize() + ` SET reason = $2, failed_at = now(), config_revision = $3 WHERE id = $1 AND replayed_at IS NULL`
}

// letterWhere returns the condition selecting f's letters of the sink's
// connector, and its arguments.
func (s *sink) letterWhere(f deadletters.Filter) (string, []any) {
	args := []any{s.info.Connector}
	where := []string{"connector = $1"}
	add := func(cond string, arg any) {
		args = append(args, arg)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Reason != "" {
		add("strpos(reason, ?) > 0", f.Reason)
	}
	if !f.Since.IsZero() {
		add("failed_at >= ?", f.Since)
	}
	if f.ID != 0 {
		add("id = ?", f.ID)
	}
	if !f.Replayed {
		where = append(where, "replayed_at IS NULL")
	}
	return strings.Join(where, " AND "), args
}

// Counts implements deadletters.Store.
func (s *sink) Counts(ctx context.Context, f deadletters.Filter) ([]deadletters.Count, error) {
	where, args := s.letterWhere(f)
	rows, err := s.pool.Query(ctx, `SELECT connector, partition_id, reason, count(*), count(replayed_at), min(failed_at), max(failed_at)
	FROM `+s.deadLetters.Sanitize()+` WHERE `+where+`
	GROUP BY connector, partition_id, reason ORDER BY connector, length(partition_id), partition_id, count(*) DESC, reason`, args...)
	if err != nil {
		return nil, s.storeErr("count dead letters", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (deadletters.Count, error) {
		var c deadletters.Count
		err := r.Scan(&c.Connector, &c.Partition, &c.Reason, &c.Letters, &c.Replayed, &c.First, &c.Last)
		return c, err
	})
	if err != nil {
		return nil, s.storeErr("count dead letters", err)
	}
	return out, nil
}

// Letters implements deadletters.Store.
func (s *sink) Letters(ctx context.Context, f deadletters.Filter) ([]deadletters.Letter, error) {
	where, args := s.letterWhere(f)
	rows, err := s.pool.Query(ctx, `SELECT id, connector, table_name, partition_id, sequence_number, "offset", enqueued_time,
		partition_key, content_type, properties, body, reason, failed_at, config_revision, replayed_at
	FROM `+s.deadLetters.Sanitize()+` WHERE `+where+` ORDER BY id`, args...)
	if err != nil {
		return nil, s.storeErr("read dead letters", err)
	}
	out, err := pgx.CollectRows(rows, scanLetter)
	if err != nil {
		return nil, s.storeErr("read dead letters", err)
	}
	return out, nil
}

// scanLetter reads one row of Letters' query.
func scanLetter(r pgx.CollectableRow) (deadletters.Letter, error) {
	var (
		l        deadletters.Letter
		enqueued *time.Time
		props    []byte
		rev      *string
	)
	ev := &l.Event
	err := r.Scan(&l.ID, &l.Connector, &l.Table, &ev.Partition, &ev.SequenceNumber, &ev.Offset, &enqueued,
		&ev.PartitionKey, &ev.ContentType, &props, &ev.Body, &l.Reason, &l.FailedAt, &rev, &l.ReplayedAt)
	if err != nil {
		return l, err
	}
	if enqueued != nil {
		ev.EnqueuedTime = enqueued.UTC()
	}
	if rev != nil {
		l.Revision = *rev
	}
	if props != nil {
		if ev.Properties, err = deadletters.DecodeProperties(props); err != nil {
			return l, fmt.Errorf("letter %d: properties: %w", l.ID, err)
		}
	}
	return l, nil
}

// Replay implements deadletters.Store.
func (s *sink) Replay(ctx context.Context, l *deadletters.Letter, o deadletters.ReplayOptions) (deadletters.Outcome, error) {
	var out deadletters.Outcome
	w := &writer{s: s, partition: l.Event.Partition, replay: l.ID}
	defer w.Close(ctx)
	out.Dropped, out.Reason = o.Drop, o.Refused
	if !o.Drop && o.Refused == "" {
		err := w.Write(ctx, []sinks.Event{l.Event})
		var be *sinks.BatchError
		switch {
		case errors.As(err, &be):
			reasons := make([]string, len(be.Failed))
			for i, f := range be.Failed {
				reasons[i] = f.Err.Error()
			}
			out.Reason = strings.Join(reasons, "; ")
		case err != nil:
			return out, fmt.Errorf("letter %d: %w", l.ID, err)
		}
	}
	if out.Reason == "" {
		out.Rows = w.preview()
	}
	var err error
	switch {
	case o.DryRun && out.Reason == "":
		// What the server would refuse, it refuses in a transaction
		// that is rolled back.
		out.Reason, err = w.tryRows(ctx)
	case o.DryRun:
	case out.Reason == "":
		_, err = w.commit(ctx)
		switch pgErr := poisonErr(err); {
		case errors.Is(err, errFenceLost):
			out.AlreadyReplayed, err = true, nil
		case pgErr != nil:
			out.Reason, err = w.refusal(pgErr).Error(), nil
		}
	}
	if err != nil {
		return out, s.storeErr(fmt.Sprintf("replay letter %d", l.ID), err)
	}
	if out.Reason != "" {
		out.Rows = nil
		if !o.DryRun {
			if _, err := s.pool.Exec(ctx, s.sqlFailedAgain, l.ID, out.Reason, nullable(o.Revision)); err != nil {
				return out, s.storeErr(fmt.Sprintf("letter %d: store its new reason", l.ID), err)
			}
		}
	}
	return out, nil
}

// preview returns the rows the writer holds, as a replay reports them.
func (w *writer) preview() []deadletters.Row {
	var out []deadletters.Row
	for _, b := range w.bufs {
		cols := b.d.r.mapper.Columns().Names()
		for _, r := range b.rows[:b.n] {
			out = append(out, deadletters.Row{Table: b.d.name, Columns: cols,
				Values: append([]any(nil), r.vals[:len(cols)]...), Delete: r.del})
		}
	}
	return out
}

// tryRows applies the rows the writer holds in a transaction it rolls
// back, and returns the server's refusal of one, if any.
func (w *writer) tryRows(ctx context.Context) (string, error) {
	w.applied()
	defer w.sortRows()
	conn, release, err := w.s.acquire(ctx)
	if err != nil {
		return "", err
	}
	failed := true
	defer func() { release(failed) }()
	if _, err := conn.Exec(ctx, "BEGIN"); err != nil {
		return "", fmt.Errorf("begin: %w", err)
	}
	var reason string
	for _, b := range w.bufs {
		err := w.probe(ctx, conn, b, b.rows[:len(b.applied)+len(b.deletes)])
		if pgErr := poisonErr(err); pgErr != nil {
			reason = w.refusal(pgErr).Error()
			break
		}
		if err != nil {
			return "", err
		}
	}
	if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
		return "", fmt.Errorf("rollback: %w", err)
	}
	failed = false
	return reason, nil
}

// refusal is the reason of a row the server refused, naming its table on a
// routed connector as isolate does.
func (w *writer) refusal(e *pgconn.PgError) error {
	reason := refusal(e)
	if w.s.sel != nil && len(w.bufs) == 1 {
		reason = fmt.Errorf("table %s: %w", w.bufs[0].d.name, reason)
	}
	return reason
}

// storeErr names the connector and the dead-letter table in err.
func (s *sink) storeErr(what string, err error) error {
	return fmt.Errorf("postgres: connector %q: %s %s: %w", s.info.Connector, s.deadLetters.Sanitize(), what, classify(err))
}

// nullable is s, or NULL when empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
