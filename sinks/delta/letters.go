package delta

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// The sink's dead-letter store, as `ehsink deadletters` reads and replays
// it (package internal/deadletters).
//
// A letter is an event of the dead-letter table: its partition and
// sequence number. The table is only appended to, so a letter may have
// several rows; the one that failed last holds its reason (a replay
// whose event fails again appends the letter with its new reason, time
// and revision). Its ID is computed from the event, not from the rows'
// order, so it stays the same across runs, new letters, checkpoints and
// log cleanup: sequence number × 10,000 + partition + 1 (a partition that
// is not a number below 10,000 gets a hash above 2^62).
//
// A replay maps the letter's event as a writer does and commits its rows
// to the data table (the route's, with routes) in one version with a txn
// action whose appId names the letter (markApp). Snapshots and
// checkpoints keep the latest txn of every appId, and this sink refuses
// a table with delta.setTransactionRetentionDuration, so the mark
// outlives log cleanup; its version is when the letter was replayed (Unix
// milliseconds). The commit is fenced on that txn as a partition's flush
// is on the partition's: of two replays of a letter, the second finds the
// mark and writes nothing. The partitions' txns are not in the commit, so
// a live connector beside the replay is undisturbed.

var (
	_ deadletters.Store = (*sink)(nil)
	_ deadletters.Store = (*routedSink)(nil)
)

// letterStore is the dead-letter store of a sink with a dead-letter
// table: dl, and the data tables a replay writes (one, or one per
// route, sel choosing). The sink and the routed sink embed it, which
// makes them deadletters.Stores. It is safe for concurrent use.
type letterStore struct {
	info   sinks.Info
	dl     *sink
	tables []*sink
	// sel and names are the routes' selector and names; sel is nil
	// without routes.
	sel   *routing.Selector
	names []string
}

// markApp is the appId of the txn that marks the letter of an event
// replayed. Its prefix is not the partitions' (appID), so no mark is
// ever taken for a partition's watermark.
func markApp(connector, partition string, seq int64) string {
	return "ehsink-letter/" + connector + "/" + partition + "/" + strconv.FormatInt(seq, 10)
}

// letterID is the ID of the letter of an event (see the top of the file).
func letterID(partition string, seq int64) int64 {
	if p, err := strconv.Atoi(partition); err == nil && p >= 0 && p < 10000 && seq >= 0 && seq < (1<<62)/10000 {
		return seq*10000 + int64(p) + 1
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", partition, seq)
	return int64(h.Sum64()>>2) | 1<<62
}

// storeErr names the connector and the dead-letter table in err.
func (ls *letterStore) storeErr(what string, err error) error {
	return fmt.Errorf("delta: connector %q: dead-letter table %s: %s: %w", ls.info.Connector, ls.dl.cfg.Table, what, err)
}

// Counts implements deadletters.Store.
func (ls *letterStore) Counts(ctx context.Context, f deadletters.Filter) ([]deadletters.Count, error) {
	letters, err := ls.Letters(ctx, f)
	if err != nil {
		return nil, err
	}
	return deadletters.CountLetters(letters), nil
}

// Letters implements deadletters.Store: it reads the dead-letter table's
// live files whole (the record column), keeps each letter's latest row
// and looks its mark up in the data tables.
func (ls *letterStore) Letters(ctx context.Context, f deadletters.Filter) ([]deadletters.Letter, error) {
	snap, err := ls.dl.latest(ctx)
	if err != nil {
		return nil, ls.storeErr("read the log", err)
	}
	type key struct {
		partition string
		seq       int64
	}
	latest := map[key]*deadletters.Letter{}
	first := map[key]time.Time{} // when each letter first failed: the order of the list
	for _, add := range snap.SortedFiles() {
		name, err := url.PathUnescape(add.Path)
		if err != nil {
			return nil, ls.storeErr("data file "+add.Path, err)
		}
		data, err := ls.dl.store.Read(ctx, name)
		if err != nil {
			return nil, ls.storeErr("data file "+name, sinks.Transient(err))
		}
		err = readRecords(data, func(line []byte) error {
			l, err := deadletters.DecodeRecord(line)
			if err != nil {
				return err
			}
			k := key{l.Event.Partition, l.Event.SequenceNumber}
			if t, ok := first[k]; !ok || l.FailedAt.Before(t) {
				first[k] = l.FailedAt
			}
			if cur := latest[k]; cur == nil || !l.FailedAt.Before(cur.FailedAt) {
				latest[k] = &l
			}
			return nil
		})
		if err != nil {
			return nil, ls.storeErr("data file "+name, err)
		}
	}
	marks := map[string]int64{}
	for _, t := range ls.tables {
		ts, err := t.latest(ctx)
		if err != nil {
			return nil, fmt.Errorf("delta: connector %q: table %s: read the log: %w", ls.info.Connector, t.cfg.Table, err)
		}
		for app, txn := range ts.Txns {
			if strings.HasPrefix(app, "ehsink-letter/") {
				marks[app] = txn.Version
			}
		}
	}
	table := ls.tables[0].cfg.Table
	if ls.sel != nil {
		table = "*"
	}
	var out []deadletters.Letter
	for k, l := range latest {
		l.ID, l.Connector, l.Table = letterID(k.partition, k.seq), ls.info.Connector, table
		if v, ok := marks[markApp(ls.info.Connector, k.partition, k.seq)]; ok {
			at := time.UnixMilli(v).UTC()
			l.ReplayedAt = &at
		}
		if (f.Reason == "" || strings.Contains(l.Reason, f.Reason)) && (f.Since.IsZero() || !l.FailedAt.Before(f.Since)) &&
			(f.ID == 0 || f.ID == l.ID) && (f.Replayed || l.ReplayedAt == nil) {
			out = append(out, *l)
		}
	}
	slices.SortFunc(out, func(a, b deadletters.Letter) int {
		ka, kb := key{a.Event.Partition, a.Event.SequenceNumber}, key{b.Event.Partition, b.Event.SequenceNumber}
		return cmp.Or(first[ka].Compare(first[kb]), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// latest reads the log again and returns the sink's newest snapshot, a
// copy the caller may keep.
func (s *sink) latest(ctx context.Context) (*deltalog.Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.dlog.Update(ctx, s.snap); err != nil {
		return nil, err
	}
	return s.snap.Clone(), nil
}

// letterRecord is the one column of a dead-letter table's file a store
// reads: the whole letter as a JSON line (letterEvent).
type letterRecord struct {
	Record *string `parquet:"record,optional"`
}

// readRecords calls fn with the record of each row of a dead-letter
// table's data file.
func readRecords(data []byte, fn func(line []byte) error) error {
	r := pq.NewGenericReader[letterRecord](bytes.NewReader(data))
	defer r.Close()
	buf := make([]letterRecord, 64)
	for {
		n, err := r.Read(buf)
		for _, rec := range buf[:n] {
			if rec.Record == nil {
				continue
			}
			if err := fn([]byte(*rec.Record)); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		clear(buf)
	}
}

// Replay implements deadletters.Store.
func (ls *letterStore) Replay(ctx context.Context, l *deadletters.Letter, o deadletters.ReplayOptions) (deadletters.Outcome, error) {
	var out deadletters.Outcome
	ev := &l.Event
	mark := markApp(ls.info.Connector, ev.Partition, ev.SequenceNumber)
	for _, t := range ls.tables {
		snap, err := t.latest(ctx)
		if err != nil {
			return out, fmt.Errorf("delta: connector %q: table %s: read the log: %w", ls.info.Connector, t.cfg.Table, err)
		}
		if _, ok := snap.TxnVersion(mark); ok {
			out.AlreadyReplayed = true
			return out, nil
		}
	}
	out.Dropped, out.Reason = o.Drop, o.Refused
	t, route := ls.tables[0], ""
	if ls.sel != nil && !o.Drop && o.Refused == "" {
		r, err := ls.sel.Select(ev)
		if err != nil {
			out.Reason = err.Error()
		} else {
			t, route = ls.tables[r], "route "+ls.names[r]+": "
		}
	}
	w := &writer{s: t, partition: ev.Partition, app: mark, log: t.log.With("partition", ev.Partition, "letter", l.ID)}
	// Close drops the files of a replay that did not commit them.
	defer w.Close(context.WithoutCancel(ctx))
	if !out.Dropped && out.Reason == "" {
		// The writer's own mapping and conversion, as a flush would write
		// the event; Write is not used, whose watermark checks are the
		// partition's.
		if err := w.writeEvent(ev); err != nil {
			out.Reason = route + err.Error()
		} else if err := w.writeRows(); err != nil {
			return out, err
		}
	}
	if !out.Dropped && out.Reason == "" {
		out.Rows = t.preview(ev)
	}
	switch {
	case o.DryRun:
		return out, nil
	case out.Reason != "":
		if err := ls.failedAgain(ctx, l, out.Reason, o.Revision); err != nil {
			return out, ls.storeErr(fmt.Sprintf("letter %d: store its new reason", l.ID), err)
		}
		return out, nil
	}
	if !out.Dropped {
		if err := w.writeFiles(ctx); err != nil {
			return out, fmt.Errorf("delta: connector %q: table %s: replay letter %d: %w", ls.info.Connector, t.cfg.Table, l.ID, err)
		}
	}
	ok, err := w.commit(ctx, &sinks.Position{SequenceNumber: t.now().UnixMilli()})
	switch {
	case errors.Is(err, sinks.ErrFenced):
		// Another replay marked the letter since it was read.
		return deadletters.Outcome{AlreadyReplayed: true}, nil
	case !ok:
		return out, fmt.Errorf("delta: connector %q: table %s: replay letter %d: %w", ls.info.Connector, t.cfg.Table, l.ID, err)
	}
	w.reset() // committed: the files are the table's now
	return out, nil
}

// failedAgain appends the letter l with its new reason, time and
// revision to the dead-letter table, in a commit with no txn: the
// partition's txn there is its writer's, and of two rows of a letter the
// later one wins.
func (ls *letterStore) failedAgain(ctx context.Context, l *deadletters.Letter, reason, revision string) error {
	dl := ls.dl
	e, err := letterEvent(&sinks.DeadLetter{Event: l.Event, Reason: reason, FailedAt: dl.now()}, revision)
	if err != nil {
		return err
	}
	w := &writer{s: dl, partition: l.Event.Partition, log: dl.log.With("partition", l.Event.Partition, "letter", l.ID)}
	defer w.Close(context.WithoutCancel(ctx))
	if err := w.writeEvent(&e); err != nil {
		return err
	}
	if err := w.writeRows(); err != nil {
		return err
	}
	if err := w.writeFiles(ctx); err != nil {
		return err
	}
	if ok, err := w.commit(ctx, &sinks.Position{}); !ok {
		return err
	}
	w.reset()
	return nil
}

// preview returns the rows e maps to in s's table, as a replay reports
// them. The caller mapped e without error first.
func (s *sink) preview(e *sinks.Event) []deadletters.Row {
	rows, err := s.mapper.Rows(e)
	if err != nil {
		return nil
	}
	defer rows.Close()
	names := s.cfg.Columns.Names()
	var out []deadletters.Row
	for j := range rows.Len() {
		vals := make([]any, len(names))
		if rows.Map(j, vals) != nil {
			continue
		}
		out = append(out, deadletters.Row{Table: s.cfg.Table, Columns: names, Values: vals})
	}
	return out
}
