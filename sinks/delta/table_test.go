package delta

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// makeTable commits version 0 of a table as another engine would: the
// given protocol and schema fields, partition columns and configuration,
// with the action order and commitInfo of Spark's CREATE TABLE.
func makeTable(t *testing.T, dir string, p deltalog.Protocol, fields []deltalog.StructField, parts []string, conf map[string]string) {
	t.Helper()
	schema, err := deltalog.SchemaString(fields)
	if err != nil {
		t.Fatal(err)
	}
	l := deltalog.New(mustLocal(t, dir))
	err = l.Commit(testCtx(t), 0, []deltalog.Action{
		{CommitInfo: map[string]any{"operation": "CREATE TABLE", "engineInfo": "Apache-Spark/3.5.1 Delta-Lake/3.2.0"}},
		{Protocol: &p},
		{MetaData: &deltalog.Metadata{ID: "5fba94ed-9794-4965-ba6e-6ee3c0d22af9", Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: schema, PartitionColumns: parts, Configuration: conf}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sparkFields are the kit's columns as a Spark table declares them, plus a
// nullable column the sink does not write.
func sparkFields(amountType string) []deltalog.StructField {
	return []deltalog.StructField{
		deltalog.PrimitiveField("id", "string", true),
		deltalog.PrimitiveField("partition", "string", true),
		deltalog.PrimitiveField("seq", "long", true),
		deltalog.PrimitiveField("customer", "string", true),
		deltalog.PrimitiveField("amount", amountType, true),
		deltalog.PrimitiveField("ts", "timestamp", true),
		deltalog.PrimitiveField("key", "string", true),
		deltalog.PrimitiveField("note", "string", true),
	}
}

func openErr(t *testing.T, dir string, edit func(*sinkConfig)) error {
	t.Helper()
	c := newConfig()
	c.Table, c.Columns = dir, kitColumns(t)
	if edit != nil {
		edit(c)
	}
	s, err := newDeltaSink(testCtx(t), c, testInfo)
	if err == nil {
		s.Close(context.Background())
	}
	return err
}

// TestExistingTable appends to a table another engine created (protocol
// 1/2, partitioned, a column the sink does not write) and refuses tables
// it must not write, with an error that says why.
func TestExistingTable(t *testing.T) {
	v12 := deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 2}
	t.Run("fits", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "t")
		makeTable(t, dir, v12, sparkFields("decimal(12,2)"), []string{"partition"}, map[string]string{"delta.appendOnly": "true"})
		s := newTestSink(t, dir, func(c *sinkConfig) { c.PartitionBy = []string{"partition"} })
		w, wm, err := s.Open(testCtx(t), "0")
		if err != nil || wm != nil {
			t.Fatalf("Open: %v, %v", wm, err)
		}
		writeFlush(t, w, sinktest.Events("0", 0, 9))
		if rows := readRows(t, dir); len(rows) != 10 {
			t.Fatalf("%d rows, want 10", len(rows))
		}
	})
	refused := []struct {
		name     string
		protocol deltalog.Protocol
		fields   []deltalog.StructField
		parts    []string
		conf     map[string]string
		want     string
	}{
		{"column type", v12, sparkFields("double"), nil, nil, "column amount is double in the table's schema"},
		{"missing column", v12, sparkFields("decimal(12,2)")[:6], nil, nil, "column key is not in the table's schema (evolve: true adds it)"},
		{"not nullable extra", v12, append(sparkFields("decimal(12,2)"), deltalog.PrimitiveField("region", "string", false)), nil, nil, "column region of the table is not nullable"},
		{"partitioning", v12, sparkFields("decimal(12,2)"), []string{"customer"}, nil, "partitioned by [customer]"},
		{"writer feature", deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}},
			sparkFields("decimal(12,2)"), nil, nil, "deletionVectors"},
		{"writer version 4", deltalog.Protocol{MinReaderVersion: 1, MinWriterVersion: 4}, sparkFields("decimal(12,2)"), nil, nil, "minWriterVersion 4"},
		{"txn retention", v12, sparkFields("decimal(12,2)"), nil, map[string]string{"delta.setTransactionRetentionDuration": "interval 7 days"}, "setTransactionRetentionDuration"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "t")
			makeTable(t, dir, tc.protocol, tc.fields, tc.parts, tc.conf)
			err := openErr(t, dir, func(c *sinkConfig) { c.Evolve = new(false) })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New on the table: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	t.Run("no table, create_table false", func(t *testing.T) {
		err := openErr(t, filepath.Join(t.TempDir(), "t"), func(c *sinkConfig) { c.CreateTable = false })
		if err == nil || !strings.Contains(err.Error(), "create_table is false") {
			t.Fatalf("New: %v", err)
		}
	})
}

// TestProtocolUpgradedMidRun: another engine upgrades the table to a
// writer feature this writer does not know between two flushes; the next
// commit is refused.
func TestProtocolUpgradedMidRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	w, _, _ := s.Open(testCtx(t), "0")
	writeFlush(t, w, sinktest.Events("0", 0, 4))
	l := deltalog.New(mustLocal(t, dir))
	snap, err := l.Load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	up := deltalog.Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"columnMapping"}, WriterFeatures: []string{"columnMapping"}}
	if err := l.Commit(testCtx(t), snap.Version+1, []deltalog.Action{{Protocol: &up}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testCtx(t), sinktest.Events("0", 5, 9)); err != nil {
		t.Fatal(err)
	}
	_, err = w.Flush(testCtx(t))
	if !errors.Is(err, deltalog.ErrProtocol) || !strings.Contains(err.Error(), "columnMapping") {
		t.Fatalf("Flush after the upgrade: %v, want ErrProtocol naming columnMapping", err)
	}
	wantOnce(t, dir, "0", 0, 4)
}

// TestSchemaChangedMidRun: another engine changes a column's type between
// two flushes; the next commit is refused, naming the column.
func TestSchemaChangedMidRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, nil)
	w, _, _ := s.Open(testCtx(t), "0")
	writeFlush(t, w, sinktest.Events("0", 0, 4))
	l := deltalog.New(mustLocal(t, dir))
	snap, err := l.Load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	fields, err := deltalog.ParseSchema(snap.Metadata.SchemaString)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range fields {
		if f.Name == "amount" {
			fields[i] = deltalog.PrimitiveField("amount", "double", true)
		}
	}
	m := *snap.Metadata
	if m.SchemaString, err = deltalog.SchemaString(fields); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(testCtx(t), snap.Version+1, []deltalog.Action{{MetaData: &m}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(testCtx(t), sinktest.Events("0", 5, 9)); err != nil {
		t.Fatal(err)
	}
	if _, err = w.Flush(testCtx(t)); err == nil || !strings.Contains(err.Error(), "column amount") {
		t.Fatalf("Flush after the schema change: %v, want an error naming column amount", err)
	}
	wantOnce(t, dir, "0", 0, 4)
}
