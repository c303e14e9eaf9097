package delta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestEvolveAddsColumns: a table made by a sink of three columns, then a
// sink of the kit's seven; the second commits a version whose metaData
// adds the four columns, nullable, before its first rows, which carry
// them; the first sink's writer, still open, goes on committing its rows
// without them. Without evolve the second sink does not start ("column
// customer is not in the table's schema").
func TestEvolveAddsColumns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	first := newTestSink(t, dir, func(c *sinkConfig) { c.Columns = c.Columns[:3] }) // id, partition, seq
	old, _, err := first.Open(testCtx(t), "1")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close(testCtx(t))
	writeFlush(t, old, sinktest.Events("1", 0, 9)) // version 1

	grown := newTestSink(t, dir, nil) // version 2: the metaData
	w, _, err := grown.Open(testCtx(t), "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(testCtx(t))
	writeFlush(t, w, sinktest.Events("0", 0, 9))     // version 3
	writeFlush(t, old, sinktest.Events("1", 10, 19)) // version 4, on the widened table

	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(deltalog.CommitName(2))))
	if err != nil {
		t.Fatal(err)
	}
	actions, err := deltalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 2 || actions[0].MetaData == nil || actions[1].CommitInfo == nil {
		t.Fatalf("version 2 is %s, want a metaData and a commitInfo", data)
	}
	fields, err := deltalog.ParseSchema(actions[0].MetaData.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i, f := range fields {
		names = append(names, f.Name)
		if i >= 3 && !f.Nullable {
			t.Errorf("added column %s is not nullable", f.Name)
		}
	}
	if want := kitColumns(t).Names(); !slices.Equal(names, want) {
		t.Errorf("the widened schema has %v, want %v", names, want)
	}

	for _, r := range readRows(t, dir) {
		seq, part := r["seq"].(int64), r["partition"].(string)
		customer, has := r["customer"]
		switch {
		case part == "0" && customer != fmt.Sprintf("c-%d", seq%7):
			t.Errorf("partition 0 seq %d: customer %v, want c-%d", seq, customer, seq%7)
		case part == "1" && has:
			t.Errorf("partition 1 seq %d (the old mapping's writer) has a customer column", seq)
		}
	}
	var want []int64
	for seq := range int64(20) {
		want = append(want, seq)
	}
	if got := seqsOf(readRows(t, dir)); !slices.Equal(got["0"], want[:10]) || !slices.Equal(got["1"], want) {
		t.Errorf("rows by partition %v", got)
	}
}

// TestEvolveLosesTheRace: a sink holding the log as it was before
// another replica added the columns commits its metaData at a version
// that replica took; it reads that version, finds the columns there and
// commits nothing. Without the retry it fails with "version already
// committed".
func TestEvolveLosesTheRace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	slow := newTestSink(t, dir, func(c *sinkConfig) { c.Columns = c.Columns[:3] })
	newTestSink(t, dir, nil).Close(context.Background()) // version 1: the metaData
	slow.cfg.Columns = kitColumns(t)
	if err := slow.evolve(testCtx(t)); err != nil {
		t.Fatalf("evolve on a stale snapshot: %v", err)
	}
	if v := slow.snap.Version; v != 1 {
		t.Errorf("the sink's snapshot is at version %d, want 1 (the other replica's)", v)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(deltalog.CommitName(2)))); !os.IsNotExist(err) {
		t.Errorf("version 2 exists (%v): the columns were added twice", err)
	}
}

// TestEvolveLeavesARefusedTableAlone: a table the sink would refuse for
// another reason (a column of another type) is not widened first; the
// error names that column and the log keeps its one version.
func TestEvolveLeavesARefusedTableAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	makeTable(t, dir, deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, sparkFields("double")[:6], nil, nil)
	err := openErr(t, dir, func(c *sinkConfig) { c.Evolve = new(true) })
	if err == nil || !strings.Contains(err.Error(), "column amount is double in the table's schema") {
		t.Fatalf("New: %v, want the error naming amount", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(deltalog.CommitName(1)))); !os.IsNotExist(err) {
		t.Errorf("version 1 exists (%v): the refused table was widened", err)
	}
}
