package deltalog

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// sparkCheckpoint writes, with arrow-go (a Parquet writer apart from the
// parquet-go this package writes with), a classic checkpoint in the
// layout of the protocol's "Checkpoint Schema" as Spark writes it: more
// fields than this package reads (tags, deletionVector, baseRowId,
// partitionValues_parsed, a remove tombstone), maps as key_value groups,
// protocol versions as int32.
func sparkCheckpoint(t *testing.T) []byte {
	t.Helper()
	strMap := arrow.MapOf(arrow.BinaryTypes.String, arrow.BinaryTypes.String)
	dv := arrow.StructOf(
		arrow.Field{Name: "storageType", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "pathOrInlineDv", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "sizeInBytes", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "cardinality", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "txn", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "appId", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "version", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "lastUpdated", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
		{Name: "add", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "partitionValues", Type: strMap, Nullable: true},
			arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "modificationTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
			arrow.Field{Name: "stats", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "tags", Type: strMap, Nullable: true},
			arrow.Field{Name: "deletionVector", Type: dv, Nullable: true},
			arrow.Field{Name: "baseRowId", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "partitionValues_parsed", Type: arrow.StructOf(
				arrow.Field{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true}), Nullable: true})},
		{Name: "remove", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "deletionTimestamp", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			arrow.Field{Name: "dataChange", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
			arrow.Field{Name: "extendedFileMetadata", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
			arrow.Field{Name: "size", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
		{Name: "metaData", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "description", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "format", Nullable: true, Type: arrow.StructOf(
				arrow.Field{Name: "provider", Type: arrow.BinaryTypes.String, Nullable: true},
				arrow.Field{Name: "options", Type: strMap, Nullable: true})},
			arrow.Field{Name: "schemaString", Type: arrow.BinaryTypes.String, Nullable: true},
			arrow.Field{Name: "partitionColumns", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
			arrow.Field{Name: "configuration", Type: strMap, Nullable: true},
			arrow.Field{Name: "createdTime", Type: arrow.PrimitiveTypes.Int64, Nullable: true})},
		{Name: "protocol", Nullable: true, Type: arrow.StructOf(
			arrow.Field{Name: "minReaderVersion", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			arrow.Field{Name: "minWriterVersion", Type: arrow.PrimitiveTypes.Int32, Nullable: true})},
	}, nil)
	rows := `[
{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
{"metaData": {"id": "0f5a8e6e-6a5f-4b8e-9e0e-6b6c1f7f4c11", "format": {"provider": "parquet", "options": []},
  "schemaString": "{\"type\":\"struct\",\"fields\":[{\"name\":\"v\",\"type\":\"long\",\"nullable\":true,\"metadata\":{}},{\"name\":\"region\",\"type\":\"string\",\"nullable\":true,\"metadata\":{}}]}",
  "partitionColumns": ["region"], "configuration": [{"key": "delta.checkpointInterval", "value": "10"}], "createdTime": 1767322800000}},
{"txn": {"appId": "3f2b1c5e-spark-streaming-query", "version": 41, "lastUpdated": 1767322800000}},
{"add": {"path": "region=eu/part-00000-a1b2-c000.snappy.parquet", "partitionValues": [{"key": "region", "value": "eu"}],
  "size": 1234, "modificationTime": 1767322800000, "dataChange": false, "stats": "{\"numRecords\":3}",
  "tags": [{"key": "INSERTION_TIME", "value": "1767322800000000"}], "baseRowId": 0, "partitionValues_parsed": {"region": "eu"}}},
{"add": {"path": "region=us%2Fwest/part-00001-c3d4-c000.snappy.parquet", "partitionValues": [{"key": "region", "value": "us/west"}],
  "size": 99, "modificationTime": 1767322800001, "dataChange": false}},
{"remove": {"path": "region=eu/part-00000-old-c000.snappy.parquet", "deletionTimestamp": 1767322700000, "dataChange": true, "extendedFileMetadata": true, "size": 7}}
]`
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, schema, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var b bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &b, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestReadSparkCheckpoint reads a checkpoint of another writer's layout:
// the live files (a remove tombstone is not one), the txn and the
// metadata, with the fields this package does not know ignored.
func TestReadSparkCheckpoint(t *testing.T) {
	s, err := DecodeCheckpoint(12, sparkCheckpoint(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.Version != 12 || s.Protocol.MinWriterVersion != 2 || s.Metadata.PartitionColumns[0] != "region" || s.Metadata.Configuration["delta.checkpointInterval"] != "10" {
		t.Fatalf("snapshot %+v protocol %+v metadata %+v", s, s.Protocol, s.Metadata)
	}
	if v, ok := s.TxnVersion("3f2b1c5e-spark-streaming-query"); !ok || v != 41 {
		t.Fatalf("txn: %d %v", v, ok)
	}
	if len(s.Files) != 2 {
		t.Fatalf("live files %v, want the two adds", s.Files)
	}
	a := s.Files["region=us/west/part-00001-c3d4-c000.snappy.parquet"]
	if a == nil || *a.PartitionValues["region"] != "us/west" || a.Size != 99 {
		t.Fatalf("the URI-encoded add: %+v", a)
	}
	if eu := s.Files["region=eu/part-00000-a1b2-c000.snappy.parquet"]; eu == nil || eu.Stats != `{"numRecords":3}` {
		t.Fatalf("the eu add: %+v", eu)
	}
	// The table then takes commits after the checkpoint, and a checkpoint
	// of its own carries the other writer's txn and files forward.
	if err := s.Apply(13, []Action{{Txn: &Txn{AppID: "ehsink/x", Version: 5}}, {Add: &Add{Path: "region=eu/p2.parquet", PartitionValues: map[string]*string{"region": str("eu")}}}}); err != nil {
		t.Fatal(err)
	}
	if len(s.Tombstones) != 1 {
		t.Fatalf("tombstones %v, want the removed file", s.Tombstones)
	}
	// A tombstone stays in the checkpoints for the table's
	// deletedFileRetentionDuration (a week here), then expires.
	removedAt := time.UnixMilli(1767322700000)
	for _, tc := range []struct {
		now        time.Time
		tombstones int
	}{{removedAt.Add(time.Hour), 1}, {removedAt.Add(8 * 24 * time.Hour), 0}} {
		data, _, err := EncodeCheckpoint(s, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeCheckpoint(13, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(again.Files) != 3 || len(again.Txns) != 2 || len(again.Tombstones) != tc.tombstones {
			t.Fatalf("re-checkpointed at %s: %d files, %d txns, %d tombstones; want 3, 2 and %d",
				tc.now, len(again.Files), len(again.Txns), len(again.Tombstones), tc.tombstones)
		}
	}
}

// TestCheckpointReadByArrow reads a checkpoint this package wrote with
// arrow-go, which finds the action columns and their fields by name as
// other engines do.
func TestCheckpointReadByArrow(t *testing.T) {
	s := NewSnapshot()
	if err := s.Apply(0, sampleCommit()); err != nil {
		t.Fatal(err)
	}
	data, n, err := EncodeCheckpoint(s, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	if tbl.NumRows() != n {
		t.Fatalf("arrow-go read %d rows, want %d", tbl.NumRows(), n)
	}
	want := map[string][]string{
		"txn":      {"appId", "version", "lastUpdated"},
		"add":      {"path", "partitionValues", "size", "modificationTime", "dataChange", "stats"},
		"metaData": {"id", "format", "schemaString", "partitionColumns", "configuration", "createdTime"},
		"protocol": {"minReaderVersion", "minWriterVersion"},
	}
	for col, fields := range want {
		f, _ := tbl.Schema().FieldsByName(col)
		if len(f) != 1 {
			t.Fatalf("column %s: %d fields of that name", col, len(f))
		}
		st, isStruct := f[0].Type.(*arrow.StructType)
		if !isStruct {
			t.Fatalf("column %s: %v, want a struct", col, f)
		}
		for _, name := range fields {
			if _, found := st.FieldByName(name); !found {
				t.Errorf("column %s has no field %s (%s)", col, name, st)
			}
		}
	}
	add, _ := tbl.Schema().FieldsByName("add")
	if typ, _ := add[0].Type.(*arrow.StructType).FieldByName("partitionValues"); typ.Type.ID() != arrow.MAP {
		t.Errorf("add.partitionValues is %s, want a map", typ.Type)
	}
}
