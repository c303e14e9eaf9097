package iceberg

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestEvolveAddsFields: a table made by a sink of three columns, then a
// sink of the kit's nine; the second adds the six fields (optional, new
// field IDs) and its rows carry them, read back with iceberg-go's scan,
// while the first rows read null. Without evolve the second sink does not
// start ("the table has no such field").
func TestEvolveAddsFields(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	first := l.newSink(t, func(c *sinkConfig) { c.Columns = c.Columns[:3] }) // id, partition, seq
	flushRange(t, first, 0, 9)
	first.Close(ctx)

	grown := l.newSink(t, nil)
	flushRange(t, grown, 10, 19)

	sc := l.loadTable(t).Schema()
	for i, c := range kitColumns(t) {
		f, ok := sc.FindFieldByName(c.Name)
		switch {
		case !ok:
			t.Errorf("the table has no field %s", c.Name)
		case i >= 3 && (f.Required || f.ID <= 3):
			t.Errorf("added field %s: required %v, id %d; want optional with a new id", c.Name, f.Required, f.ID)
		}
	}
	if got := len(sc.Fields()); got != len(kitColumns(t)) {
		t.Errorf("the table has %d fields, want %d", got, len(kitColumns(t)))
	}

	tbl := l.loadTable(t)
	_, itr, err := tbl.Scan(table.WithSelectedFields("seq", "customer")).ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var without, with []int64
	for rec, err := range itr {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		seqs := rec.Column(int(rec.Schema().FieldIndices("seq")[0])).(*array.Int64)
		customers := rec.Column(int(rec.Schema().FieldIndices("customer")[0])).(*array.String)
		for i := range int(rec.NumRows()) {
			seq := seqs.Value(i)
			switch {
			case customers.IsNull(i):
				without = append(without, seq)
			case customers.Value(i) == fmt.Sprintf("c-%d", seq%7):
				with = append(with, seq)
			default:
				t.Errorf("seq %d: customer %q", seq, customers.Value(i))
			}
		}
		rec.Release()
	}
	slices.Sort(without)
	slices.Sort(with)
	var want []int64
	for seq := range int64(20) {
		want = append(want, seq)
	}
	if !slices.Equal(without, want[:10]) || !slices.Equal(with, want[10:]) {
		t.Errorf("rows without a customer %v (want 0-9), with theirs %v (want 10-19)", without, with)
	}
}

// TestEvolveLosesTheRace: a replica adds the fields while another holds
// the table's older metadata; the other's schema update then loses the
// race (the catalog refuses it on the current schema id), is made again on
// the table as it is now, which needs nothing, and succeeds. Without the
// retry it fails with the catalog's "requirement failed".
func TestEvolveLosesTheRace(t *testing.T) {
	ctx := context.Background()
	l := newLake(t)
	slow := l.newSink(t, func(c *sinkConfig) { c.Columns = c.Columns[:3] })
	d := slow.dests[0]
	stale := d.current()
	l.newSink(t, nil).Close(ctx) // the first replica adds the six fields

	d.mu.Lock()
	d.tbl.Store(stale)
	d.cols = kitColumns(t)
	err := slow.evolve(ctx, d)
	schemas := len(d.tbl.Load().Metadata().Schemas())
	d.mu.Unlock()
	if err != nil {
		t.Fatalf("evolve on stale metadata: %v", err)
	}
	if got := len(l.loadTable(t).Schema().Fields()); got != len(kitColumns(t)) || schemas != 2 {
		t.Errorf("the table has %d fields and %d schemas, want %d and 2", got, schemas, len(kitColumns(t)))
	}
}

// flushRange writes seq from..to of partition 0 through s and flushes.
func flushRange(t *testing.T, s *sink, from, to int64) {
	t.Helper()
	ctx := context.Background()
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	if err := w.Write(ctx, sinktest.Events("0", from, to)); err != nil {
		t.Fatal(err)
	}
	if pos, err := w.Flush(ctx); err != nil || pos == nil || pos.SequenceNumber != to {
		t.Fatalf("Flush = %v, %v; want %d", pos, err, to)
	}
}
