package parquet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// benchColumns maps the benchmark's order events to 8 columns.
func benchColumns(b testing.TB) mapping.Columns {
	b.Helper()
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"order_id", "$.order_id", "string"},
		{"customer", "$.customer.id", "string"},
		{"country", "$.customer.country", "string"},
		{"amount", "$.amount", "double"},
		{"currency", "$.currency", "string"},
		{"items", "$.items", "int32"},
		{"status", "$.status", "string"},
		{"created_at", "$.created_at", "timestamp(ms)"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			b.Fatal(err)
		}
		cols = append(cols, col)
	}
	return cols
}

// benchOrder is the same row for the direct parquet-go writer, with the
// same physical and logical types, dictionary encoding and compression.
type benchOrder struct {
	OrderID   string    `parquet:"order_id,dict"`
	Customer  string    `parquet:"customer,dict"`
	Country   string    `parquet:"country,dict"`
	Amount    float64   `parquet:"amount,dict"`
	Currency  string    `parquet:"currency,dict"`
	Items     int32     `parquet:"items,dict"`
	Status    string    `parquet:"status,dict"`
	CreatedAt time.Time `parquet:"created_at,timestamp(millisecond),dict"`
}

// benchJSON is what a hand-written program decodes the body into.
type benchJSON struct {
	OrderID  string `json:"order_id"`
	Customer struct {
		ID      string `json:"id"`
		Country string `json:"country"`
	} `json:"customer"`
	Amount    float64   `json:"amount"`
	Currency  string    `json:"currency"`
	Items     int32     `json:"items"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Note      string    `json:"note"`
}

var benchStatuses = [...]string{"new", "paid", "shipped", "delivered", "cancelled"}
var benchCountries = [...]string{"DE", "FR", "NL", "SE", "PL", "IT", "ES"}

// fillEvent makes event seq of a partition: about 200 bytes of JSON,
// written into e's reused body buffer.
func fillEvent(e *sinks.Event, partition string, seq int64) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).Add(time.Duration(seq) * 37 * time.Millisecond)
	body := e.Body[:0]
	body = fmt.Appendf(body, `{"order_id":"ord-%010d","customer":{"id":"cust-%05d","country":"%s"},"amount":%d.%02d,"currency":"EUR","items":%d,"status":"%s","created_at":"%s","note":"gift wrap, leave at door"}`,
		seq, seq%5000, benchCountries[seq%7], seq%1000, seq%100, 1+seq%9, benchStatuses[seq%5], ts.Format("2006-01-02T15:04:05.000Z"))
	*e = sinks.Event{Partition: partition, SequenceNumber: seq, Offset: strconv.FormatInt(seq*256, 10), EnqueuedTime: ts, Body: body}
}

func benchEvents(n int) []sinks.Event {
	events := make([]sinks.Event, n)
	for i := range events {
		fillEvent(&events[i], "0", int64(i))
	}
	return events
}

// runSink writes events through the sink in batches of 500, as the runner
// would, rolling when FlushDue says so, and flushes at the end.
func runSink(b *testing.B, dir string, events []sinks.Event) {
	runSinkWith(b, dir, events, nil)
}

// runSinkWith is runSink with edit applied to the config.
func runSinkWith(b *testing.B, dir string, events []sinks.Event, edit func(*sinkConfig)) {
	ctx := context.Background()
	c := newConfig()
	c.Dir = dir
	c.Columns = benchColumns(b)
	if edit != nil {
		edit(c)
	}
	s, err := newParquetSink(ctx, c, sinks.Info{Connector: "bench", EventHub: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(events); i += 500 {
		if err := w.Write(ctx, events[i:min(i+500, len(events))]); err != nil {
			b.Fatal(err)
		}
		if w.(sinks.Batcher).FlushDue(time.Now()) {
			if _, err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
}

// runDirect decodes the same bodies with encoding/json and writes the rows
// with parquet-go's GenericWriter to a file: what a program without the
// sink would do.
func runDirect(b *testing.B, path string, events []sinks.Event) {
	rows := make([]benchOrder, 0, 500)
	writeDirect(b, path, len(events), func(i, j int) []benchOrder {
		rows = rows[:0]
		for _, e := range events[i:j] {
			rows = append(rows, decodeOrder(b, e.Body))
		}
		return rows
	})
}

func decodeOrder(b *testing.B, body []byte) benchOrder {
	var j benchJSON
	if err := json.Unmarshal(body, &j); err != nil {
		b.Fatal(err)
	}
	return benchOrder{OrderID: j.OrderID, Customer: j.Customer.ID, Country: j.Customer.Country,
		Amount: j.Amount, Currency: j.Currency, Items: j.Items, Status: j.Status, CreatedAt: j.CreatedAt}
}

// writeDirect writes n rows, in batches of 500 that rows returns, with
// parquet-go's GenericWriter.
func writeDirect(b *testing.B, path string, n int, rows func(i, j int) []benchOrder) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := pq.NewGenericWriter[benchOrder](f, pq.Compression(&pq.Zstd), pq.DataPageStatistics(true))
	for i := 0; i < n; i += 500 {
		if _, err := w.Write(rows(i, min(i+500, n))); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSinkVsParquetGo writes 100,000 events of about 200 bytes of JSON,
// mapped to 8 columns, through the sink and directly with parquet-go (JSON
// decoded by encoding/json), in the same run, and reports both throughputs
// and their ratio (sink/direct; the goal is at least 0.7). It also reports
// the ratio against writing rows decoded in advance (parquet-go's write
// alone), the harder comparison.
func BenchmarkSinkVsParquetGo(b *testing.B) {
	const n = 100_000
	events := benchEvents(n)
	var bodyBytes int
	for _, e := range events {
		bodyBytes += len(e.Body)
	}
	// The rows decoded in advance, for a write-only comparison.
	decoded := make([]benchOrder, n)
	for i, e := range events {
		decoded[i] = decodeOrder(b, e.Body)
	}
	var sinkTime, directTime, writeOnlyTime time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		start := time.Now()
		runSink(b, filepath.Join(dir, "sink"), events)
		sinkTime += time.Since(start)
		start = time.Now()
		runDirect(b, filepath.Join(dir, "direct.parquet"), events)
		directTime += time.Since(start)
		start = time.Now()
		writeDirect(b, filepath.Join(dir, "decoded.parquet"), n, func(i, j int) []benchOrder { return decoded[i:j] })
		writeOnlyTime += time.Since(start)
	}
	sinkRate := float64(n*b.N) / sinkTime.Seconds()
	directRate := float64(n*b.N) / directTime.Seconds()
	b.ReportMetric(sinkRate, "sink_events/s")
	b.ReportMetric(directRate, "direct_events/s")
	b.ReportMetric(sinkRate/directRate, "ratio")
	writeOnlyRate := float64(n*b.N) / writeOnlyTime.Seconds()
	b.ReportMetric(writeOnlyRate, "direct_predecoded_events/s")
	b.ReportMetric(sinkRate/writeOnlyRate, "ratio_vs_predecoded")
	b.ReportMetric(float64(bodyBytes)/n, "body_bytes/event")
}

// BenchmarkPeakHeap writes 1,000,000 events through 4 partitions (one
// writer each, round-robin batches of 500, files rolling at 250,000 rows)
// with a 4 MiB row group, sampling the heap after every batch. Events are
// generated batch by batch, so the heap holds only what the sink keeps. It
// reports the high-water mark of the live heap (marked live by the last GC)
// for each half of the run: memory bounded by row_group_size x partitions
// shows as a second half no higher than the first, although the second
// half has written twice the events.
func BenchmarkPeakHeap(b *testing.B) {
	const n, partitions, rowGroup = 1_000_000, 4, 4 << 20
	for b.Loop() {
		first, second, inUse := peakHeap(b, n, partitions, rowGroup)
		b.ReportMetric(float64(max(first, second))/(1<<20), "peak_live_heap_MiB")
		b.ReportMetric(float64(first)/(1<<20), "peak_live_1st_half_MiB")
		b.ReportMetric(float64(second)/(1<<20), "peak_live_2nd_half_MiB")
		b.ReportMetric(float64(inUse)/(1<<20), "peak_heap_inuse_MiB")
		b.ReportMetric(float64(partitions*rowGroup)/(1<<20), "row_groups_x_partitions_MiB")
	}
}

// peakHeap returns the high-water marks of the live heap in the first and
// second half of the run, and of the heap in use (live plus garbage not yet
// collected, which GOGC lets grow to about twice the live heap).
func peakHeap(b *testing.B, n, partitions int, rowGroup int64) (first, second, inUse uint64) {
	ctx := context.Background()
	c := newConfig()
	c.Dir = b.TempDir()
	c.Columns = benchColumns(b)
	c.RowGroupSize = config.ByteSize(rowGroup)
	c.MaxRows = 250_000
	_, ws := openBenchWriters(b, c, partitions)
	batch := make([]sinks.Event, 500)
	next := make([]int64, partitions)
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	for done := 0; done < n; done += len(batch) {
		p := (done / len(batch)) % partitions
		for i := range batch {
			fillEvent(&batch[i], strconv.Itoa(p), next[p])
			next[p]++
		}
		if err := ws[p].Write(ctx, batch); err != nil {
			b.Fatal(err)
		}
		if ws[p].(sinks.Batcher).FlushDue(time.Now()) {
			if _, err := ws[p].Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		metrics.Read(sample)
		if done < n/2 {
			first = max(first, sample[0].Value.Uint64())
		} else {
			second = max(second, sample[0].Value.Uint64())
		}
		inUse = max(inUse, sample[1].Value.Uint64())
	}
	for _, w := range ws {
		if _, err := w.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := w.Close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	return first, second, inUse
}

// BenchmarkSinkSmallFiles writes 100,000 events through the sink with files
// rolling every max_rows rows (1,000 as in a low-latency landing zone, and
// 10,000), so that the cost of starting a Parquet writer per file, which
// the single-file BenchmarkSinkVsParquetGo never pays, shows up.
func BenchmarkSinkSmallFiles(b *testing.B) {
	const n = 100_000
	events := benchEvents(n)
	for _, maxRows := range []int64{1_000, 10_000} {
		b.Run(fmt.Sprintf("max_rows=%d", maxRows), func(b *testing.B) {
			var elapsed time.Duration
			for b.Loop() {
				start := time.Now()
				runSinkWith(b, b.TempDir(), events, func(c *sinkConfig) { c.MaxRows = maxRows })
				elapsed += time.Since(start)
			}
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(n/maxRows), "files")
		})
	}
}

// BenchmarkWriterPerFile measures what a new Parquet writer per file costs
// against resetting the previous file's writer (which the sink must not
// do: parquet-go v0.32.0's Reset writes files without path_in_schema,
// parquet-go/parquet-go#602). Both write the same files of 1,000 mapped
// rows to io.Discard, alternating in one loop so that the machine's load
// weighs on both alike, and it reports the time per file of each and
// their ratio (fresh/reset).
func BenchmarkWriterPerFile(b *testing.B) {
	const rowsPerFile = 1_000
	c := newConfig()
	c.Dir = b.TempDir()
	c.Columns = benchColumns(b)
	s, err := newParquetSink(context.Background(), c, sinks.Info{Connector: "bench", EventHub: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	r := s.routes[0]
	var rows []pq.Row
	var vals []any
	for _, e := range benchEvents(rowsPerFile) {
		mr, err := r.mapper.Mapper().Rows(&e)
		if err != nil {
			b.Fatal(err)
		}
		var row pq.Row
		if row, vals, err = r.mapper.MapRow(mr, 0, nil, vals); err != nil {
			b.Fatal(err)
		}
		mr.Close()
		rows = append(rows, row)
	}
	writeFile := func(pw *pq.GenericWriter[any]) {
		if _, err := pw.WriteRows(rows); err != nil {
			b.Fatal(err)
		}
		if err := pw.Close(); err != nil {
			b.Fatal(err)
		}
	}
	out := &countingWriter{w: io.Discard}
	reused := s.newParquetWriter(out, 0)
	writeFile(reused)
	var fresh, reset time.Duration
	timeFresh := func() {
		start := time.Now()
		writeFile(s.newParquetWriter(out, 0))
		fresh += time.Since(start)
	}
	timeReset := func() {
		start := time.Now()
		reused.Reset(out)
		writeFile(reused)
		reset += time.Since(start)
	}
	for i := 0; b.Loop(); i++ {
		// Each goes first every other round: the second of a round finds
		// the caches warm.
		if i%2 == 0 {
			timeFresh()
			timeReset()
		} else {
			timeReset()
			timeFresh()
		}
	}
	b.ReportMetric(float64(fresh.Microseconds())/float64(b.N), "fresh_us/file")
	b.ReportMetric(float64(reset.Microseconds())/float64(b.N), "reset_us/file")
	b.ReportMetric(fresh.Seconds()/reset.Seconds(), "ratio")
}

// openBenchWriters builds a sink from c and opens a writer for each of
// partitions partitions ("0", "1", …).
func openBenchWriters(b *testing.B, c *sinkConfig, partitions int) (*sink, []sinks.Writer) {
	b.Helper()
	ctx := context.Background()
	s, err := newParquetSink(ctx, c, sinks.Info{Connector: "bench", EventHub: "orders"})
	if err != nil {
		b.Fatal(err)
	}
	ws := make([]sinks.Writer, partitions)
	for p := range ws {
		if ws[p], _, err = s.Open(ctx, strconv.Itoa(p)); err != nil {
			b.Fatal(err)
		}
	}
	return s, ws
}
