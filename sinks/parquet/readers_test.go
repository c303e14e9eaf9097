package parquet

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// allTypesColumns maps every column type the mapping offers, each
// nullable (null in one event of seven, a different one per column), plus
// the sequence number. With explode, $ is the element.
func allTypesColumns(t testing.TB) mapping.Columns {
	t.Helper()
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"s", "$.s", "string"},
		{"i32", "$.i32", "int32"},
		{"i64", "$.i64", "int64"},
		{"d", "$.d", "double"},
		{"b", "$.b", "boolean"},
		{"ts_ms", "$.ts", "timestamp(ms)"},
		{"ts_us", "$.ts", "timestamp(us)"},
		{"dec9", "$.dec", "decimal(9,2)"},
		{"dec18", "$.dec", "decimal(18,4)"},
		{"dec30", "$.big", "decimal(30,3)"},
		{"j", "$.j", "json"},
		{"u", "$.u", "uuid"},
		{"raw", "$.raw", "bytes"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		col.Nullable = true
		cols = append(cols, col)
	}
	seq, err := mapping.NewColumn("seq", "@sequence_number", "")
	if err != nil {
		t.Fatal(err)
	}
	return append(cols, seq)
}

// allTypesValue is the JSON object of row k of event i: every field of
// allTypesColumns, one of them missing (null) by turns. Values rise and
// fall with i, negative ones included, so a row group's minimum and
// maximum are not its first and last rows.
func allTypesValue(i, k int64) string {
	n := i*3 + k
	sign := int64(1 - 2*(n%2))
	ts := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC).Add(time.Duration(sign*n*1_234_567) * time.Microsecond)
	fields := []string{
		fmt.Sprintf(`"s":"v-%03d-é"`, (n*37)%101),
		fmt.Sprintf(`"i32":%d`, sign*n*1000),
		fmt.Sprintf(`"i64":%d`, sign*n<<33),
		fmt.Sprintf(`"d":%d.25`, sign*n),
		fmt.Sprintf(`"b":%v`, n%3 == 0),
		fmt.Sprintf(`"ts":"%s"`, ts.Format(time.RFC3339Nano)),
		fmt.Sprintf(`"dec":"%d.5"`, sign*n),
		fmt.Sprintf(`"big":"%d123456789012345678901.%03d"`, sign*n, n%1000),
		fmt.Sprintf(`"j":{"n":%d}`, n),
		fmt.Sprintf(`"u":"%08x-e89b-12d3-a456-4266141740%02x"`, (n*2654435761)%(1<<32), n%256),
		// base64 of ASCII text: bytes that are also valid UTF-8, so
		// hyparquet's text form of them orders as the bytes do.
		fmt.Sprintf(`"raw":"%s"`, b64(fmt.Sprintf("raw-%03d", (n*53)%97))),
	}
	skip := int(i % 7 * 2 % int64(len(fields)))
	fields = append(fields[:skip], fields[skip+1:]...)
	return "{" + strings.Join(fields, ",") + "}"
}

// TestIndependentReaders writes files through the real sink and checks
// every one with hyparquet and DuckDB (internal/parquettest/check.mjs):
// each column chunk's path_in_schema, physical and logical types,
// num_values, and min, max and null-count statistics against the data read
// back, in files rolled by rows, bytes and age, several per writer, with
// routes and explode, on a local folder and on Blob (Azurite), over every
// column type with nulls. The arrow-go read-back checks the rows.
func TestIndependentReaders(t *testing.T) {
	t.Run("local rolled by rows bytes and age", func(t *testing.T) {
		d := localDestination(t)
		cols := allTypesColumns(t)
		clk := &clock{t: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}
		s := newSink(t, d, func(c *sinkConfig) {
			c.Columns = cols
			c.RowGroupSize = 2 * config.KiB // several row groups per file
			c.MaxRows = 60
			c.MaxBytes = 12 * config.KiB
			c.MaxAge = time.Minute
		})
		s.setClock(clk.now)
		w, _ := open(t, s, "0")
		var seq int64
		batch := func(n int) []sinks.Event {
			events := make([]sinks.Event, n)
			for i := range events {
				events[i] = sinks.Event{Partition: "0", SequenceNumber: seq, Offset: fmt.Sprint(seq * 100),
					EnqueuedTime: clk.t, Body: []byte(allTypesValue(seq, 0))}
				seq++
			}
			return events
		}
		roll := func(after time.Duration) bool {
			if w.FlushDue(clk.t.Add(after)) {
				flush(t, w)
				return true
			}
			return false
		}
		// By rows: 60 rows in batches of 20.
		for range 3 {
			writeAll(t, w, batch(20))
		}
		if !roll(0) {
			t.Fatal("60 rows did not roll the file")
		}
		// By age: 5 rows, then a minute.
		writeAll(t, w, batch(5))
		if roll(time.Minute - time.Millisecond) {
			t.Fatal("rolled before max_age")
		}
		if !roll(time.Minute) {
			t.Fatal("max_age did not roll the file")
		}
		// By bytes: rows until the estimate reaches 12 KiB, before 60 rows.
		// The row group written as it fills shows in the estimate.
		for i := 0; !w.FlushDue(clk.t); i++ {
			if i == 55 {
				t.Fatal("12 KiB not reached in 55 rows")
			}
			writeAll(t, w, batch(1))
		}
		flush(t, w)
		writeAll(t, w, batch(7)) // and the last, short file
		flush(t, w)
		files := parquetFiles(t, d)
		if len(files) != 4 {
			t.Fatalf("%d files, want 4 (rows, age, bytes, last)", len(files))
		}
		r := parquettest.CheckWithReaders(t, parquettest.Expect(cols), files)
		t.Logf("hyparquet and DuckDB read %d files, %d column chunks, %d rows", r.Files, r.Chunks, r.Rows)
		if r.Rows != int(seq) {
			t.Fatalf("readers saw %d rows, want %d", r.Rows, seq)
		}
		if got := committedSeqs(t, d, "0"); len(got) != int(seq) {
			t.Fatalf("arrow-go read %d rows back, want %d", len(got), seq)
		}
	})
	t.Run("blob routes and explode", func(t *testing.T) {
		d := blobDestination(t)
		cols := allTypesColumns(t)
		s := newSink(t, d, func(c *sinkConfig) {
			c.Columns = nil
			c.Routes = []routeConfig{
				{Name: "even", When: `$.seg == 'a'`, Path: "even/{partition}-{first_seq:020}-{last_seq:020}.parquet", Columns: cols},
				{Path: "seg={$.seg}/{partition}-{first_seq:020}-{last_seq:020}.parquet", Columns: cols},
			}
			p, err := mapping.ParsePath("$.records")
			if err != nil {
				t.Fatal(err)
			}
			c.Explode = p
			c.RowGroupSize = 2 * config.KiB
			c.MaxRows = 50
		})
		var rows int
		for _, partition := range []string{"0", "1"} {
			w, _ := open(t, s, partition)
			for seq := int64(0); seq < 60; seq += 10 {
				events := make([]sinks.Event, 10)
				for i := range events {
					n := seq + int64(i)
					var recs []string
					for k := range n % 4 { // 0 to 3 rows per event
						recs = append(recs, allTypesValue(n, k))
					}
					rows += int(n % 4)
					body := fmt.Sprintf(`{"seg":"%c","records":[%s]}`, 'a'+n%3, strings.Join(recs, ","))
					events[i] = sinks.Event{Partition: partition, SequenceNumber: n, Offset: fmt.Sprint(n),
						EnqueuedTime: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC), Body: []byte(body)}
				}
				writeAll(t, w, events)
				if w.FlushDue(time.Time{}) {
					flush(t, w)
				}
			}
			flush(t, w)
			if err := w.Close(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
		files := parquetFiles(t, d)
		perRoute := map[string]int{}
		for name := range files {
			perRoute[strings.SplitN(name, "/", 2)[0]]++
		}
		for _, route := range []string{"even", "seg=b", "seg=c"} {
			if perRoute[route] < 4 {
				t.Fatalf("files per route folder %v: want at least 4 in %s (2 per writer)", perRoute, route)
			}
		}
		r := parquettest.CheckWithReaders(t, parquettest.Expect(cols), files)
		t.Logf("hyparquet and DuckDB read %d files, %d column chunks, %d rows", r.Files, r.Chunks, r.Rows)
		if r.Rows != rows {
			t.Fatalf("readers saw %d rows, want %d", r.Rows, rows)
		}
		for name, data := range files {
			readParquet(t, name, data) // arrow-go reads it too
		}
	})
}

// parquetFiles returns d's visible Parquet files.
func parquetFiles(t *testing.T, d destination) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for name, data := range d.files(t) {
		if strings.HasSuffix(name, ".parquet") {
			out[name] = data
		}
	}
	return out
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
