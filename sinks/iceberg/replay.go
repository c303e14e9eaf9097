package iceberg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/internal/deadletters"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/sinks"
)

// The sink's dead-letter store, as `ehsink deadletters` reads and replays
// it (package internal/deadletters).
//
// A letter is the newest row of its event (connector, event hub, consumer
// group, partition, sequence number) in the dead-letter table: a replay
// that fails again appends the letter anew with its new reason, time and
// revision, and the newer row wins. Its ID comes from the event's
// position (letterID), so it is the same in every run.
//
// A replay maps the event through the sink's routes and mapping as a
// writer does and appends its rows to the route's table in one commit that
// also marks the letter replayed there: a table property per partition
// (markKey) listing the replayed sequence numbers. A property is table
// metadata, not a snapshot's, so snapshot expiry and compaction leave it;
// the commit asserts the table's current snapshot, and every mark makes a
// snapshot (one without files when the letter writes no row), so two
// replays of one letter cannot both commit. The snapshot's summary carries
// the table's watermarks unchanged: a live writer's fence still holds,
// and it only commits again on the new metadata, as after any lost race.
// A letter that writes no row (dropped by the filter, an empty array) is
// marked in the dead-letter table.

var _ deadletters.Store = (*sink)(nil)

// markPrefix begins the table property of a partition's replayed letters.
const markPrefix = "ehsink.replayed."

// markKey is the table property that lists the replayed letters of a
// partition: ehsink.replayed.<connector>.<eventhub>.<consumergroup>.p<partition>.
func markKey(info sinks.Info, partition string) string {
	return markPrefix + info.Connector + "." + info.EventHub + "." + info.ConsumerGroup + ".p" + partition
}

// marks are a partition's replayed letters in one table: sequence number
// → when the replay committed it (Unix seconds). The property holds them
// as "seq@seconds" items, comma separated, in sequence order.
type marks map[int64]int64

func parseMarks(key, v string) (marks, error) {
	m := marks{}
	for item := range strings.SplitSeq(v, ",") {
		if item == "" {
			continue
		}
		seq, at, _ := strings.Cut(item, "@")
		s, err1 := strconv.ParseInt(seq, 10, 64)
		t, err2 := strconv.ParseInt(at, 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("table property %s: item %q is not seq@seconds: %w", key, item, err)
		}
		m[s] = t
	}
	return m, nil
}

func (m marks) String() string {
	var b strings.Builder
	for _, seq := range slices.Sorted(maps.Keys(m)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d@%d", seq, m[seq])
	}
	return b.String()
}

// letterKey is a letter's event in the sink's connector, hub and group.
type letterKey struct {
	partition string
	seq       int64
}

// idPartition is what a letter ID's partition is multiplied by: the
// sequence number takes the twelve digits below it.
const idPartition = 1_000_000_000_000

// letterID is the ID of the letter of partition's event seq: the
// partition's number plus one, then the sequence number in twelve digits
// (partition 0 seq 17 is 1000000000017).
func letterID(partition string, seq int64) (int64, error) {
	p, err := strconv.ParseInt(partition, 10, 64)
	if err != nil || p < 0 || p >= math.MaxInt64/idPartition-1 || seq < 0 || seq >= idPartition {
		return 0, fmt.Errorf("partition %q sequence number %d: not a partition number and a sequence number under 10^12, which a letter ID is made of", partition, seq)
	}
	return (p+1)*idPartition + seq, nil
}

// Letters implements deadletters.Store: the letters of the sink's
// connector, event hub and consumer group, in ID order (by partition,
// then oldest first).
func (s *sink) Letters(ctx context.Context, f deadletters.Filter) ([]deadletters.Letter, error) {
	all, err := s.readLetters(ctx)
	if err != nil {
		return nil, s.storeErr("read dead letters", err)
	}
	marked, err := s.readMarks(ctx)
	if err != nil {
		return nil, s.storeErr("read replay marks", err)
	}
	var out []deadletters.Letter
	for _, l := range all {
		if at, ok := marked[letterKey{l.Event.Partition, l.Event.SequenceNumber}]; ok {
			t := time.Unix(at, 0).UTC()
			l.ReplayedAt = &t
		}
		if f.Selects(&l) {
			out = append(out, l)
		}
	}
	return out, nil
}

// Counts implements deadletters.Store.
func (s *sink) Counts(ctx context.Context, f deadletters.Filter) ([]deadletters.Count, error) {
	letters, err := s.Letters(ctx, f)
	if err != nil {
		return nil, err
	}
	return deadletters.CountLetters(letters), nil
}

// readLetters scans the dead-letter table for the letters of the sink's
// connector, event hub and consumer group, the newest row of each event.
func (s *sink) readLetters(ctx context.Context) ([]deadletters.Letter, error) {
	tbl, err := s.refresh(ctx, s.dl)
	if err != nil {
		return nil, unreachable(err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	info := s.info
	filter := ice.NewAnd(ice.EqualTo(ice.Reference("connector"), info.Connector),
		ice.EqualTo(ice.Reference("eventhub"), info.EventHub), ice.EqualTo(ice.Reference("consumer_group"), info.ConsumerGroup))
	_, recs, err := tbl.Scan(table.WithRowFilter(filter),
		table.WithSelectedFields("connector", "eventhub", "consumer_group", "record")).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	dest := "*"
	if s.sel == nil {
		dest = s.dests[0].name()
	}
	newest := map[letterKey]int{}
	var out []deadletters.Letter
	for rec, err := range recs {
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		col := func(name string) *array.String {
			return rec.Column(rec.Schema().FieldIndices(name)[0]).(*array.String)
		}
		conns, hubs, groups, records := col("connector"), col("eventhub"), col("consumer_group"), col("record")
		for i := range int(rec.NumRows()) {
			if conns.Value(i) != info.Connector || hubs.Value(i) != info.EventHub || groups.Value(i) != info.ConsumerGroup {
				continue // the filter prunes files; a file may hold other connectors' rows
			}
			l, err := deadletters.DecodeRecord([]byte(records.Value(i)))
			if err == nil {
				l.ID, err = letterID(l.Event.Partition, l.Event.SequenceNumber)
			}
			if err != nil {
				rec.Release()
				return nil, fmt.Errorf("letter %s: %w", records.Value(i), err)
			}
			l.Connector, l.Table = info.Connector, dest
			k := letterKey{l.Event.Partition, l.Event.SequenceNumber}
			if j, ok := newest[k]; !ok {
				newest[k] = len(out)
				out = append(out, l)
			} else if !l.FailedAt.Before(out[j].FailedAt) {
				out[j] = l
			}
		}
		rec.Release()
	}
	slices.SortFunc(out, func(a, b deadletters.Letter) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// readMarks reads the replay marks of the sink's connector, event hub and
// consumer group in every table a replay may have marked: the dead-letter
// table, the routes' tables and, when a route's table is a template, the
// namespace's other tables.
func (s *sink) readMarks(ctx context.Context) (map[letterKey]int64, error) {
	var tables []*table.Table
	seen := map[string]bool{}
	for _, d := range append([]*dest{s.dl}, s.dests...) {
		if d == nil {
			continue
		}
		tbl, err := s.refresh(ctx, d)
		if err != nil {
			return nil, unreachable(err)
		}
		tables, seen[d.name()] = append(tables, tbl), true
	}
	if slices.ContainsFunc(s.tmpls, func(t *expr.Template) bool { return t != nil }) {
		for ident, err := range s.cat.ListTables(ctx, s.ns) {
			if err != nil {
				return nil, unreachable(fmt.Errorf("list the tables of namespace %s: %w", s.cfg.Namespace, err))
			}
			if seen[strings.Join(ident, ".")] {
				continue
			}
			tbl, err := s.cat.LoadTable(ctx, ident)
			if errors.Is(err, catalog.ErrNoSuchTable) {
				continue // dropped since the listing
			}
			if err != nil {
				return nil, unreachable(fmt.Errorf("load table %s: %w", strings.Join(ident, "."), err))
			}
			tables = append(tables, tbl)
		}
	}
	prefix := markKey(s.info, "")
	out := map[letterKey]int64{}
	for _, tbl := range tables {
		for k, v := range tbl.Properties() {
			partition, ok := strings.CutPrefix(k, prefix)
			if !ok {
				continue
			}
			m, err := parseMarks(k, v)
			if err != nil {
				return nil, err
			}
			for seq, at := range m {
				out[letterKey{partition, seq}] = at
			}
		}
	}
	return out, nil
}

// Replay implements deadletters.Store.
func (s *sink) Replay(ctx context.Context, l *deadletters.Letter, o deadletters.ReplayOptions) (deadletters.Outcome, error) {
	out := deadletters.Outcome{Dropped: o.Drop, Reason: o.Refused}
	ev := &l.Event
	fail := func(err error) (deadletters.Outcome, error) {
		return out, s.storeErr(fmt.Sprintf("replay letter %d", l.ID), err)
	}
	if s.closed.Load() {
		return fail(sinks.ErrClosed)
	}
	marked, err := s.readMarks(ctx)
	if err != nil {
		return fail(err)
	}
	if _, ok := marked[letterKey{ev.Partition, ev.SequenceNumber}]; ok {
		out.AlreadyReplayed = true
		return out, nil
	}
	w := &writer{s: s, partition: ev.Partition, key: watermarkKey(s.info, ev.Partition), log: s.log.With("partition", ev.Partition)}
	w.tag = fileTag(w.key)
	// p gathers the rows for d's table (its builder freed on return).
	var p *part
	use := func(d *dest) {
		if p != nil {
			p.rows.release()
		}
		p = &part{d: d, rows: newRowBuilder(d.cols, d.arrow)}
	}
	// A letter that writes no row is marked in the dead-letter table.
	use(s.dl)
	defer func() { p.rows.release() }()
	if !o.Drop && o.Refused == "" {
		d, _, evErr, infra := s.destOf(ctx, ev)
		switch {
		case infra != nil:
			return fail(infra)
		case evErr != nil:
			out.Reason = evErr.Error()
		default:
			use(d)
			cols := d.cols.Names()
			err := w.mapEvent(p, ev, func(vals []any) {
				p.rows.add(vals)
				out.Rows = append(out.Rows, deadletters.Row{Table: d.name(), Columns: cols, Values: slices.Clone(vals)})
			})
			if err != nil {
				out.Reason, out.Rows = err.Error(), nil
			}
		}
	}
	switch {
	case o.DryRun:
		return out, nil
	case out.Reason != "":
		// The letter anew, with the reason it fails with now.
		again := sinks.DeadLetter{Event: *ev, Reason: out.Reason, FailedAt: s.now()}
		use(s.dl)
		vals := letterRow(s.info, ev.Partition, &again, o.Revision)
		if err := p.rows.check(vals); err != nil {
			return fail(err)
		}
		p.rows.add(vals)
		if _, err := w.commitReplay(ctx, p, -1); err != nil {
			return fail(fmt.Errorf("store its new reason: %w", err))
		}
		return out, nil
	}
	if out.AlreadyReplayed, err = w.commitReplay(ctx, p, ev.SequenceNumber); err != nil {
		return fail(err)
	}
	if out.AlreadyReplayed {
		out.Rows = nil
	}
	return out, nil
}

// commitReplay appends p's rows to its table in one commit that carries
// the table's watermarks unchanged and, unless seq is negative, marks the
// letter of the writer's partition's event seq replayed. It reports
// already when the table holds that mark before the commit (another
// replay made it first), and then writes nothing.
func (w *writer) commitReplay(ctx context.Context, p *part, seq int64) (already bool, err error) {
	d, key := p.d, markKey(w.s.info, w.partition)
	marked := func(tbl *table.Table) (marks, bool, error) {
		if seq < 0 {
			return nil, false, nil
		}
		m, err := parseMarks(key, tbl.Properties()[key])
		_, ok := m[seq]
		return m, ok, err
	}
	tbl, err := w.s.refresh(ctx, d)
	if err != nil {
		return false, unreachable(err)
	}
	if _, ok, err := marked(tbl); ok || err != nil {
		return ok, err
	}
	if p.rows.rows > 0 {
		p.record = p.rows.record()
		if err := w.writeFiles(ctx, p); err != nil {
			w.discardPart(ctx, p, tbl)
			return false, unreachable(err)
		}
	}
	for attempt := 1; ; attempt++ {
		d.mu.Lock()
		tbl = d.tbl.Load()
		m, ok, err := marked(tbl)
		if ok || err != nil {
			d.mu.Unlock()
			w.discardPart(ctx, p, tbl)
			return ok, err
		}
		err = w.s.commitMarked(ctx, d, p.files, key, m, seq)
		d.mu.Unlock()
		switch {
		case err == nil:
			p.reset()
			return false, nil
		case !lostRace(err) || attempt >= maxCommitAttempts:
			// The catalog may have taken the commit: its files stay, and
			// a replay run again finds the mark or commits anew.
			p.ambiguous = !lostRace(err)
			w.discardPart(ctx, p, tbl)
			return false, unreachable(err)
		}
		if err := backoff(ctx, attempt); err != nil {
			w.discardPart(ctx, p, tbl)
			return false, err
		}
		if _, err := w.s.refresh(ctx, d); err != nil {
			w.discardPart(ctx, p, tbl)
			return false, unreachable(err)
		}
	}
}

// commitMarked makes one attempt at committing files to d's table, with
// the mark of seq (unless negative) added to m under key, in a snapshot
// whose summary carries the table's watermarks unchanged. It asserts the
// table's current snapshot. The caller holds d.mu.
func (s *sink) commitMarked(ctx context.Context, d *dest, files []ice.DataFile, key string, m marks, seq int64) error {
	tbl := d.tbl.Load()
	tx := tbl.NewTransaction()
	if err := tx.AssertRefSnapshotID(table.MainBranch); err != nil {
		return err
	}
	if seq >= 0 {
		m[seq] = s.now().Unix()
		if err := tx.SetProperties(ice.Properties{key: m.String()}); err != nil {
			return fmt.Errorf("mark the letter: %w", err)
		}
	}
	// A snapshot even without files: the mark then still moves the
	// branch, so a concurrent replay's assertion fails.
	if err := addSnapshot(ctx, tx, files, carriedProps(tbl.Metadata())); err != nil {
		return err
	}
	if err := s.step(stepBeforeSwap); err != nil {
		return err
	}
	newTbl, err := tx.Commit(ctx)
	if err != nil {
		return fmt.Errorf("commit to table %s: %w", d.name(), err)
	}
	d.tbl.Store(newTbl)
	return nil
}

// storeErr names the connector and the dead-letter table in err.
func (s *sink) storeErr(what string, err error) error {
	return fmt.Errorf("iceberg: connector %q: table %s: %s: %w", s.info.Connector, s.dl.name(), what, err)
}
