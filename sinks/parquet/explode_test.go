package parquet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// Exploded events: event s holds s%4 records (some none); one record of
// event explodeBadElem does not convert, and event explodeBadEvent has no
// array.
const (
	explodeBadElem  = 25 // its element 0 does not convert
	explodeBadEvent = 30 // records is not an array
)

func explodeEvents() []sinks.Event {
	events := sinktest.Events("0", 0, 39)
	for i := range events {
		s := events[i].SequenceNumber
		var recs []string
		for k := range int(s % 4) {
			v := fmt.Sprint(k)
			if s == explodeBadElem && k == 0 {
				v = `"bad"`
			}
			recs = append(recs, fmt.Sprintf(`{"id":"%d-%d","v":%s}`, s, k, v))
		}
		body := `{"records":[` + strings.Join(recs, ",") + `]}`
		if s == explodeBadEvent {
			body = `{"records":"none"}`
		}
		events[i].Body = []byte(body)
	}
	return events
}

// explodeConfig makes c a connector exploding $.records.
func explodeConfig(t testing.TB, c *sinkConfig) {
	t.Helper()
	var cols mapping.Columns
	for _, spec := range [][3]string{{"seq", "@sequence_number", ""}, {"idx", "@index", ""}, {"id", "$.id", ""}, {"v", "$.v", "int32"}} {
		col, err := mapping.NewColumn(spec[0], spec[1], spec[2])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	c.Columns = cols
	p, err := mapping.ParsePath("$.records")
	if err != nil {
		t.Fatal(err)
	}
	c.Explode = p
}

// explodedWant is what a clean run of explodeEvents writes: "seq-idx" of
// every element that converts, in order.
func explodedWant() []string {
	var want []string
	for s := int64(0); s < 40; s++ {
		if s == explodeBadEvent {
			continue
		}
		for k := range s % 4 {
			if s == explodeBadElem && k == 0 {
				continue
			}
			want = append(want, fmt.Sprintf("%d-%d", s, k))
		}
	}
	return want
}

// wantExplodedOnce checks the data files hold each element of a clean run
// exactly once (read back with arrow-go, files in range order), and the
// dead letters the two bad events once each.
func wantExplodedOnce(t *testing.T, d destination) {
	t.Helper()
	files := d.files(t)
	var names []string
	for n := range files {
		if strings.HasSuffix(n, ".parquet") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var got []string
	for _, n := range names {
		for _, r := range readParquet(t, n, files[n]).Rows {
			id := fmt.Sprintf("%d-%d", r["seq"].(int64), r["idx"].(int64))
			if r["id"] != id || r["v"] != int32(r["idx"].(int64)) {
				t.Fatalf("%s: row %v is not element %s", n, r, id)
			}
			got = append(got, id)
		}
	}
	if want := explodedWant(); !slices.Equal(got, want) {
		t.Fatalf("elements %v, want each of %v exactly once", got, want)
	}
	if got := deadLetterSeqs(t, d); !slices.Equal(got, []int64{explodeBadElem, explodeBadEvent}) {
		t.Fatalf("dead letters %v, want [%d %d] once each", got, explodeBadElem, explodeBadEvent)
	}
}

// TestExplode writes exploded events to each destination in batches that
// a replay repeats in part, and reads every element back once.
func TestExplode(t *testing.T) {
	forEachDestination(t, func(t *testing.T, d destination) {
		s := newSink(t, d, func(c *sinkConfig) { explodeConfig(t, c) })
		events := explodeEvents()
		w, wm := open(t, s, "0")
		replayWithDeadLetters(t, w, nil, wm, events[:17])
		if err := w.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		w, wm = open(t, s, "0")
		defer w.Close(ctxT(t))
		if wm == nil || wm.SequenceNumber != 16 {
			t.Fatalf("watermark after the first flush %v, want 16", wm)
		}
		replayWithDeadLetters(t, w, nil, wm, events) // from the start: the watermark skips what is there
		wantExplodedOnce(t, d)
		if err := w.Write(ctxT(t), events[39:]); err != nil { // a replay of the last event is skipped
			t.Fatal(err)
		}
		if err := w.Close(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// logRecord is record i of the benchmark's platform-log events.
func logRecord(i int64) string {
	return fmt.Sprintf(`{"time":"2026-05-06T07:08:%02d.1234567Z","resourceId":"/SUBSCRIPTIONS/0000/RESOURCEGROUPS/RG/PROVIDERS/MICROSOFT.KEYVAULT/VAULTS/KV1","operationName":"SecretGet","category":"AuditEvent","resultType":"Success","durationMs":%d,"callerIpAddress":"10.0.0.%d","properties":{"id":"https://kv1.vault.azure.net/secrets/s%d"}}`, i%60, 10+i%90, i%250, i)
}

// BenchmarkExplodeWrite compares, in the same loop, a Parquet writer fed
// events of 20 log records each (explode: $.records) with one fed the same
// records one per event: each iteration writes 2,000 rows both ways, timed
// apart (a busy machine slows both alike), and commits a file every 10
// iterations. The figure to read is explode/single, the ratio of their rows
// per second.
func BenchmarkExplodeWrite(b *testing.B) {
	const perEvent, rows = 20, 2000
	var cols mapping.Columns
	for _, c := range [][3]string{{"time", "$.time", "timestamp"}, {"resource", "$.resourceId", ""}, {"operation", "$.operationName", ""},
		{"category", "$.category", ""}, {"result", "$.resultType", ""}, {"duration_ms", "$.durationMs", "int64"},
		{"caller", "$.callerIpAddress", ""}, {"props", "$.properties", "json"}, {"seq", "@sequence_number", ""}} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			b.Fatal(err)
		}
		cols = append(cols, col)
	}
	newWriter := func(explode bool) *writer {
		c := newConfig()
		c.Dir = b.TempDir()
		c.Columns = cols
		if explode {
			c.Explode, _ = mapping.ParsePath("$.records")
			c.Columns = append(slices.Clone(cols), mapping.Column{Name: "idx", From: mapping.Source{Kind: mapping.SourceIndex}, Type: mapping.Type{Kind: mapping.KindInt64}})
		}
		s, err := newParquetSink(context.Background(), c, sinks.Info{Connector: "bench", EventHub: "logs", ConsumerGroup: "$Default"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close(context.Background()) })
		w, _, err := s.Open(context.Background(), "0")
		if err != nil {
			b.Fatal(err)
		}
		return w.(*writer)
	}
	xw, sw := newWriter(true), newWriter(false)
	xev := make([]sinks.Event, rows/perEvent)
	sev := make([]sinks.Event, rows)
	var xseq, sseq int64
	fill := func() {
		for i := range xev {
			recs := make([]string, perEvent)
			for k := range recs {
				recs[k] = logRecord(xseq*perEvent + int64(k))
			}
			xev[i] = sinks.Event{Partition: "0", SequenceNumber: xseq, Offset: fmt.Sprint(xseq), Body: []byte(`{"records":[` + strings.Join(recs, ",") + `]}`)}
			xseq++
		}
		for i := range sev {
			sev[i] = sinks.Event{Partition: "0", SequenceNumber: sseq, Offset: fmt.Sprint(sseq), Body: []byte(logRecord(sseq))}
			sseq++
		}
	}
	ctx := context.Background()
	var exploded, single time.Duration
	n := 0
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		t0 := time.Now()
		if err := xw.Write(ctx, xev); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := sw.Write(ctx, sev); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if n++; n%10 == 0 {
			if _, err := xw.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			if _, err := sw.Flush(ctx); err != nil {
				b.Fatal(err)
			}
			exploded += t3.Sub(t2)
			single += time.Since(t3)
		}
		exploded += t1.Sub(t0)
		single += t2.Sub(t1)
	}
	b.ReportMetric(float64(rows*b.N)/exploded.Seconds(), "exploded_rows/s")
	b.ReportMetric(float64(rows*b.N)/single.Seconds(), "single_rows/s")
	b.ReportMetric(single.Seconds()/exploded.Seconds(), "explode/single")
}
