package delta

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestReadersAgree writes a partitioned table from four partitions and
// has readers nobody here wrote read every live data file the log names:
// hyparquet (columns by path, as Spark) and DuckDB check every column
// chunk against the types the mapping promises and read every row; the
// add actions' statistics are checked against the rows.
func TestReadersAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, func(c *sinkConfig) { c.PartitionBy = []string{"partition"}; c.Compression = "snappy" })
	s.rowGroup = 1000 // several row groups per file, written as the rows come
	for _, p := range []string{"0", "1", "2", "3"} {
		w, _, err := s.Open(testCtx(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for from := int64(0); from < 50; from += 10 {
			if err := w.Write(testCtx(t), sinktest.Events(p, from, from+9)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Flush(testCtx(t)); err != nil {
			t.Fatal(err)
		}
		writeFlush(t, w, sinktest.Events(p, 50, 99))
		w.Close(testCtx(t))
	}
	snap, err := deltalog.New(mustLocal(t, dir)).Load(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	var statRows int64
	for _, a := range snap.SortedFiles() {
		name, err := url.PathUnescape(a.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(name, "partition="+*a.PartitionValues["partition"]+"/") {
			t.Errorf("file %s is not in the folder of its partition value %q", name, *a.PartitionValues["partition"])
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != a.Size {
			t.Errorf("file %s: size %d in the log, %d on disk", name, a.Size, len(data))
		}
		files[name] = data
		var st struct {
			NumRecords int64          `json:"numRecords"`
			Min        map[string]any `json:"minValues"`
			Max        map[string]any `json:"maxValues"`
			Nulls      map[string]any `json:"nullCount"`
		}
		if err := json.Unmarshal([]byte(a.Stats), &st); err != nil {
			t.Fatalf("file %s: stats %q: %v", name, a.Stats, err)
		}
		tb, err := parquettest.Read(data)
		if err != nil {
			t.Fatal(err)
		}

		if int(st.NumRecords) != len(tb.Rows) {
			t.Errorf("file %s: numRecords %d, %d rows", name, st.NumRecords, len(tb.Rows))
		}
		statRows += st.NumRecords
		minSeq, maxSeq := tb.Rows[0]["seq"].(int64), tb.Rows[0]["seq"].(int64)
		for _, r := range tb.Rows {
			if _, ok := r["partition"]; ok {
				t.Fatalf("file %s holds the partition column; Delta keeps it in the log", name)
			}
			minSeq, maxSeq = min(minSeq, r["seq"].(int64)), max(maxSeq, r["seq"].(int64))
		}
		if groups := rowGroups(t, data); minSeq == 0 && groups < 2 {
			// The file of the flush of five writes, at 1000 estimated
			// bytes a row group, has several.
			t.Errorf("file %s has %d row group, want several", name, groups)
		}
		if st.Min["seq"] != float64(minSeq) || st.Max["seq"] != float64(maxSeq) {
			t.Errorf("file %s: seq stats %v..%v, rows %d..%d", name, st.Min["seq"], st.Max["seq"], minSeq, maxSeq)
		}
		if st.Min["ts"] == nil || st.Max["amount"] == nil || st.Nulls["id"] != float64(0) {
			t.Errorf("file %s: stats %s lack ts, amount or id", name, a.Stats)
		}
	}
	if statRows != 400 {
		t.Fatalf("numRecords add up to %d, want 400", statRows)
	}
	var dataCols mapping.Columns
	for _, c := range kitColumns(t) {
		if c.Name != "partition" {
			dataCols = append(dataCols, c)
		}
	}
	r := parquettest.CheckWithReaders(t, parquettest.Expect(dataCols), files)
	if r.Rows != 400 {
		t.Fatalf("hyparquet and DuckDB read %d rows, want 400", r.Rows)
	}
}

func mustLocal(t *testing.T, dir string) *deltalog.LocalStore {
	t.Helper()
	st, err := deltalog.NewLocalStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDuckDBReadsCheckpoint has DuckDB read a checkpoint the sink wrote
// (a Parquet file of actions, found by column names): the protocol, the
// partition columns, every partition's txn and every live file.
func TestDuckDBReadsCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, func(c *sinkConfig) { c.CheckpointInterval = 4; c.PartitionBy = []string{"partition"} })
	for i := int64(0); i < 2; i++ {
		for _, p := range []string{"0", "1"} {
			w, _, err := s.Open(testCtx(t), p)
			if err != nil {
				t.Fatal(err)
			}
			writeFlush(t, w, sinktest.Events(p, i*10, i*10+9))
			w.Close(testCtx(t))
		}
	}
	cp := filepath.Join(dir, filepath.FromSlash(deltalog.CheckpointName(4)))
	rows := parquettest.DuckDB(t, fmt.Sprintf(`SELECT count(add)::INTEGER AS adds, sum(CASE WHEN add.stats IS NOT NULL THEN 1 ELSE 0 END)::INTEGER AS stats,
		any_value(protocol.minReaderVersion) AS r, any_value(protocol.minWriterVersion) AS w,
		any_value(metaData.partitionColumns)[1] AS pc,
		string_agg(txn.appId || '=' || txn.version::VARCHAR, ',' ORDER BY txn.appId) AS txns
		FROM read_parquet('%s')`, cp))
	want := map[string]any{"adds": float64(4), "stats": float64(4), "r": float64(1), "w": float64(2), "pc": "partition",
		"txns": offsetApp(appID(testInfo, "0")) + "=19000," + offsetApp(appID(testInfo, "1")) + "=19000," +
			appID(testInfo, "0") + "=19," + appID(testInfo, "1") + "=19"}
	for k, v := range want {
		if len(rows) != 1 || rows[0][k] != v {
			t.Fatalf("DuckDB read the checkpoint as %v; want %s = %v", rows, k, v)
		}
	}
}

// TestDayPartition partitions by a column and by the UTC day of a
// timestamp: the day is a Delta date column of the table, in the folders
// and the add actions, and the timestamp stays in the files.
func TestDayPartition(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t")
	s := newTestSink(t, dir, func(c *sinkConfig) {
		c.Columns[5].Nullable = false // ts
		c.PartitionBy = []string{"partition", "day(ts)"}
	})
	w, _, err := s.Open(testCtx(t), "3")
	if err != nil {
		t.Fatal(err)
	}
	writeFlush(t, w, sinktest.Events("3", 0, 9))
	snap := s.current()
	if !slices.Equal(snap.Metadata.PartitionColumns, []string{"partition", "ts_date"}) || !strings.Contains(snap.Metadata.SchemaString, `{"name":"ts_date","type":"date","nullable":false`) {
		t.Fatalf("metadata %+v", snap.Metadata)
	}
	files := snap.SortedFiles()
	if len(files) != 1 || !strings.HasPrefix(files[0].Path, "partition=3/ts_date=2026-01-02/") || *files[0].PartitionValues["ts_date"] != "2026-01-02" {
		t.Fatalf("files %+v", files[0])
	}
	rows := readRows(t, dir)
	if len(rows) != 10 || rows[0]["ts"] == nil {
		t.Fatalf("rows %v: want 10 with ts", rows)
	}
	// A reader that takes partition values from the folders, as Hive
	// layouts are read, sees the date.
	got := parquettest.DuckDB(t, fmt.Sprintf(`SELECT count(*)::INTEGER AS n, any_value(ts_date)::VARCHAR AS d FROM read_parquet('%s/*/*/*.parquet', hive_partitioning = true)`, dir))
	if len(got) != 1 || got[0]["n"] != float64(10) || got[0]["d"] != "2026-01-02" {
		t.Fatalf("DuckDB: %v", got)
	}
}

// rowGroups counts a Parquet file's row groups, with parquet-go's footer
// reader.
func rowGroups(t *testing.T, data []byte) int {
	t.Helper()
	f, err := pq.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return len(f.RowGroups())
}
