package parquet

import (
	"maps"
	"slices"
	"testing"

	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestMappingGrows: a sink restarted with a column added to its mapping
// writes it in the files it writes from then on; the files written before
// keep their schema (a file is never rewritten), and the partition
// resumes after them.
func TestMappingGrows(t *testing.T) {
	d := localDestination(t)
	first := newSink(t, d, func(c *sinkConfig) { c.Columns = c.Columns[:2] }) // id, seq
	w, _ := open(t, first, "0")
	writeAll(t, w, sinktest.Events("0", 0, 9))
	flush(t, w)
	w.Close(ctxT(t))

	w, pos := open(t, newSink(t, d, nil), "0")
	if pos == nil || pos.SequenceNumber != 9 {
		t.Fatalf("watermark %+v after the mapping grew, want seq 9", pos)
	}
	writeAll(t, w, sinktest.Events("0", 10, 19))
	flush(t, w)
	w.Close(ctxT(t))

	files := d.files(t)
	want := map[string][]string{
		"orders/partition=0/date=2026-01-02/0-00000000000000000000-00000000000000000009.parquet": {"id", "seq"},
		"orders/partition=0/date=2026-01-02/0-00000000000000000010-00000000000000000019.parquet": kitColumns(t).Names(),
	}
	if len(files) != len(want) {
		t.Fatalf("files %v, want the two of %v", slices.Sorted(maps.Keys(files)), want)
	}
	for name, cols := range want {
		tb := readParquet(t, name, files[name])
		var got []string
		for _, f := range tb.Fields {
			got = append(got, f.Name)
		}
		if !slices.Equal(got, cols) {
			t.Errorf("%s has columns %v, want %v", name, got, cols)
		}
		for _, r := range tb.Rows {
			if c, ok := r["customer"]; len(cols) > 2 && (!ok || c == nil) {
				t.Errorf("%s: seq %v has no customer", name, r["seq"])
			}
		}
	}
}
