package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// Deletes.
//
// A connector with a delete condition (or format: debezium) turns some
// events into deletes of their key. A delete obeys the ordering guard of
// an upsert: it removes the row only when the row was written by another
// partition or by an earlier event of the delete's partition. Once the
// row is gone, the guard has nothing to compare a replayed older update
// with, so the delete leaves a tombstone: a row of the table's tombstone
// table, ehsink_tombstones_<table> in the table's schema, holding the key,
// the partition and the sequence number of the delete, and when it was
// committed. An upsert then writes a row only when no tombstone of its key
// holds a later delete of its partition: a replayed older update (a lost
// watermark, a second consumer group writing the same table) does not
// bring the row back, while a newer update does (and the row's own guard
// takes over from the tombstone). Across partitions the last write wins,
// as for rows.
//
// Within one flush the versions of a key (update, delete, update)
// collapse to the newest before anything is written, so a flush writes
// each key once: an upsert or a delete.
//
// Cost: a tombstone row per deleted key (the key, 40 bytes and an index
// entry), one probe of the tombstones' primary key per upserted row (about
// 1.6 µs of server time, whatever their number), and a statement per flush
// that has deletes (BenchmarkDeletes and docs/configuration.md have the figures). Tombstones are kept for
// tombstone_retention (168h by default, the longest retention of the
// Standard tier): an older event of the key can only be replayed while
// the event hub still holds it, so a retention at least the hub's keeps
// the guard whole. After a commit, at most once per cleanup interval per
// sink, the writer deletes the tombstones committed longer ago than the
// retention.

// tombstoneTable is the tombstone table of a target table, in its schema.
func tombstoneTable(target pgx.Identifier) pgx.Identifier {
	return qualify(target, "ehsink_tombstones_"+target[len(target)-1])
}

// tombstoneDDL creates the tombstone table of a target: the key columns,
// typed as the mapping types them, and the partition and sequence number
// of the delete, with the time it was committed for the cleanup.
func tombstoneDDL(t pgx.Identifier, cols mapping.Columns, key []string) string {
	var b strings.Builder
	b.WriteString(`CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (`)
	for _, k := range key {
		if i := cols.Index(k); i >= 0 {
			b.WriteString(quote(k) + " " + pgType(cols[i].Type) + " NOT NULL, ")
		}
	}
	b.WriteString(quote(partitionColumn) + ` text NOT NULL, ` + quote(seqColumn) + ` bigint NOT NULL, ` +
		`deleted_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (` + quoteList(key) + `))`)
	return b.String()
}

// keyEqual compares the key columns of two aliases.
func keyEqual(key []string, a, b string) string {
	eq := make([]string, len(key))
	for i, k := range key {
		eq[i] = a + "." + quote(k) + " = " + b + "." + quote(k)
	}
	return strings.Join(eq, " AND ")
}

// notDeletedLater is the upsert's WHERE clause against the tombstones:
// the row's key (alias u) holds no later delete of the flush's partition
// (the parameter partition, such as "$4"). Empty without tombstones.
//
// It is a scalar subquery on purpose: PostgreSQL runs it once per row as a
// probe of the tombstones' primary key, whatever their number. Written as
// NOT EXISTS it became an anti-join, which the planner served with a
// sequential scan of the whole tombstone table on every flush (1.9 ms per
// flush at 20,000 tombstones, growing with them).
func notDeletedLater(tombstones pgx.Identifier, key []string, u, partition string) string {
	if tombstones == nil {
		return ""
	}
	s := quote(seqColumn)
	return ` WHERE coalesce((SELECT x.` + s + ` FROM ` + tombstones.Sanitize() + ` AS x WHERE ` + keyEqual(key, "x", u) +
		` AND x.` + quote(partitionColumn) + ` = ` + partition + `::text), -1) < ` + u + `.` + s
}

// deleteSQL deletes the keys of a flush, given as the upsert's
// parameters are (upsertSQL: one array per copied column, cast to
// arrayTypes, then the partition), with every column but the key and the
// sequence number NULL. It records each delete in the tombstones (a later
// delete of a key replaces an earlier one of the same partition, any
// delete one of another partition) and removes the rows the guard lets
// it: rows of another partition or of an earlier event.
func deleteSQL(target, tombstones pgx.Identifier, copyCols, arrayTypes, key []string) string {
	p, s := quote(partitionColumn), quote(seqColumn)
	arrays := make([]string, len(copyCols))
	for i := range copyCols {
		arrays[i] = "$" + itoa(i+1) + "::" + arrayTypes[i]
	}
	part := "$" + itoa(len(copyCols)+1) + "::text"
	keys := quoteList(key)
	return `WITH u AS (SELECT * FROM unnest(` + strings.Join(arrays, ", ") + `) AS u (` + quoteList(copyCols) + `)), ` +
		`tomb AS (INSERT INTO ` + tombstones.Sanitize() + ` AS x (` + keys + `, ` + p + `, ` + s + `, deleted_at) ` +
		`SELECT ` + keys + `, ` + part + `, ` + s + `, now() FROM u ON CONFLICT (` + keys + `) DO UPDATE SET ` +
		p + ` = EXCLUDED.` + p + `, ` + s + ` = EXCLUDED.` + s + `, deleted_at = EXCLUDED.deleted_at ` +
		`WHERE x.` + p + ` IS DISTINCT FROM EXCLUDED.` + p + ` OR x.` + s + ` < EXCLUDED.` + s + `) ` +
		`DELETE FROM ` + target.Sanitize() + ` AS t USING u WHERE ` + keyEqual(key, "t", "u") +
		` AND (t.` + s + ` IS NULL OR t.` + p + ` IS DISTINCT FROM ` + part + ` OR t.` + s + ` < u.` + s + `)`
}

// cleanupSQL deletes the tombstones committed longer ago than $1.
func cleanupSQL(tombstones pgx.Identifier) string {
	return `DELETE FROM ` + tombstones.Sanitize() + ` WHERE deleted_at < now() - $1::interval`
}

// prepareDeletes creates d's tombstone table and builds its delete
// statement for the copied columns' array types; running it on no rows
// checks it.
func (s *sink) prepareDeletes(ctx context.Context, tx pgx.Tx, d *dest, arrayTypes []string) error {
	key := d.r.cfg.Key
	if _, err := tx.Exec(ctx, tombstoneDDL(d.tombstones, d.r.mapper.Columns(), key)); err != nil {
		return fmt.Errorf("create tombstone table: %w", classify(err))
	}
	d.sqlDelete = deleteSQL(d.target, d.tombstones, d.r.copyCols, arrayTypes, key)
	args := make([]any, len(d.r.copyCols)+1)
	args[len(d.r.copyCols)] = ""
	if _, err := tx.Exec(ctx, d.sqlDelete, args...); err != nil {
		return fmt.Errorf("delete statement: %w", classify(err))
	}
	return nil
}

// splitDeletes moves the deletes of rows behind the other rows, by swaps
// (every row keeps its own buffers), and returns both parts.
func splitDeletes(rows []bufRow) (upserts, deletes []bufRow) {
	n := 0
	for i := range rows {
		if !rows[i].del {
			rows[n], rows[i] = rows[i], rows[n]
			n++
		}
	}
	return rows[:n], rows[n:]
}

// cleanupInterval is the least time between two tombstone cleanups of a
// sink (or the retention, when shorter).
const cleanupInterval = time.Hour

// cleanupClock spaces the tombstone cleanups of a sink: at most one per
// interval, by whichever writer flushes first once it is due.
type cleanupClock struct {
	next atomic.Int64 // unix nanoseconds of the next cleanup
}

// due reports whether a cleanup should run now, and if so claims it: the
// next one is due an interval later.
func (c *cleanupClock) due(now time.Time, interval time.Duration) bool {
	next := c.next.Load()
	if now.UnixNano() < next {
		return false
	}
	return c.next.CompareAndSwap(next, now.Add(interval).UnixNano())
}

// cleanTombstones deletes the tombstones older than the retention from
// every tombstone table of the sink, once per cleanup interval (the first
// flush of a sink runs one). A failure is logged: the tombstones stay
// until the next cleanup, which costs space, not correctness.
func (s *sink) cleanTombstones(ctx context.Context, now time.Time) {
	if !s.deletes || !s.cleanup.due(now, min(cleanupInterval, s.cfg.TombstoneRetention)) {
		return
	}
	var tables []pgx.Identifier
	for _, r := range s.routes {
		if r.static != nil && r.static.tombstones != nil {
			tables = append(tables, r.static.tombstones)
		}
	}
	s.mu.Lock()
	for _, d := range s.dests {
		if d.tombstones != nil && d.err == nil {
			tables = append(tables, d.tombstones)
		}
	}
	s.mu.Unlock()
	for _, t := range tables {
		tag, err := s.pool.Exec(ctx, cleanupSQL(t), s.cfg.TombstoneRetention)
		if err != nil {
			s.log.Warn("tombstone cleanup failed; retried at the next interval", "table", t.Sanitize(), "err", err)
			continue
		}
		if n := tag.RowsAffected(); n > 0 {
			s.log.Info("tombstones past their retention deleted", "table", t.Sanitize(), "count", n)
		}
	}
}
