package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/sinks"
)

// BenchmarkRoutedAppend writes 100,000 events (Write+Flush per batch of
// 1,000) into one table, and through two routes (paid orders, one in
// three, to one table, the rest to another) in the same loop, and reports
// both rates and their ratio (routed/single).
func BenchmarkRoutedAppend(b *testing.B) {
	dsn := newDB(b)
	cols := benchColumns(b)
	for _, t := range []string{"single", "paid", "unpaid"} {
		execSQL(b, dsn, `CREATE TABLE `+t+` (`+benchColumnsDDL+`)`)
	}
	single := newTestSink(b, &sinkConfig{DSN: secret.String(dsn), Table: "single", Columns: cols, PoolSize: 1})
	routed := newTestSink(b, &sinkConfig{DSN: secret.String(dsn), PoolSize: 1, Routes: []routeConfig{
		{When: `$.paid == true`, Table: "paid", Columns: cols},
		{Table: "unpaid", Columns: cols},
	}})
	events := make([]sinks.Event, benchEvents)
	for i := range events {
		events[i] = sinks.Event{Partition: "0", SequenceNumber: int64(i), Offset: "0", Body: benchBody(i)}
	}
	ctx := context.Background()
	run := func(s *sink, partition string) time.Duration {
		w, _, err := s.Open(ctx, partition)
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close(ctx)
		start := time.Now()
		for i := 0; i < len(events); i += benchBatch {
			if err := w.Write(ctx, events[i:i+benchBatch]); err != nil {
				b.Fatal(err)
			}
			if _, err := w.Flush(ctx); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	var singleTime, routedTime time.Duration
	n := 0
	for b.Loop() {
		// A new partition each round, so that the watermark lets all in.
		p := string(rune('a' + n%26))
		singleTime += run(single, p)
		routedTime += run(routed, p)
		n++
	}
	singleRate := float64(benchEvents*n) / singleTime.Seconds()
	routedRate := float64(benchEvents*n) / routedTime.Seconds()
	b.ReportMetric(singleRate, "single_events/s")
	b.ReportMetric(routedRate, "routed_events/s")
	b.ReportMetric(routedRate/singleRate, "ratio")
}
