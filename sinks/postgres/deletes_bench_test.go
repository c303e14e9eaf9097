package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/sinks"
)

// BenchmarkDeletes measures what deletes cost the upsert path: 100,000
// events over 20,000 keys through Write+Flush in batches of 1,000, as the
// runner drives them, into
//
//   - upsert: a connector without deletes;
//   - guarded: the same events with a delete condition that none meets,
//     against a tombstone table holding a tombstone of every key (of
//     another partition, so that none blocks): the price of the guard
//     alone, one index probe per row;
//   - deletes-10pct: one event in ten a delete.
//
// It reports events per second of each; the variants take turns.
func BenchmarkDeletes(b *testing.B) {
	const keys = 20_000
	enq := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	events := func(deleteEvery int) []sinks.Event {
		out := make([]sinks.Event, benchEvents)
		for i := range out {
			body := benchBody(i % keys)
			if deleteEvery > 0 && i%deleteEvery == deleteEvery-1 {
				body = fmt.Appendf(nil, `{"op":"d","order_id":%d}`, i%keys)
			}
			out[i] = sinks.Event{Partition: "0", SequenceNumber: int64(i), Offset: fmt.Sprint(i * 300), EnqueuedTime: enq, Body: body}
		}
		return out
	}
	type variant struct {
		name        string
		deletes     bool
		deleteEvery int
		dsn         string
		s           *sink
		evs         []sinks.Event
		took        time.Duration
	}
	vs := []*variant{{name: "upsert"}, {name: "guarded", deletes: true}, {name: "deletes-10pct", deletes: true, deleteEvery: 10}}
	for _, v := range vs {
		v.dsn = newDB(b)
		cfg := &sinkConfig{DSN: secret.String(v.dsn), Table: "bench_sink", Mode: modeUpsert, Key: []string{"order_id"},
			Columns: benchColumns(b), CreateTable: true, PoolSize: 1}
		if v.deletes {
			cfg.Delete = &cdc.Delete{When: "$.op == 'd'"}
		}
		v.s = newTestSink(b, cfg)
		v.evs = events(v.deleteEvery)
	}
	ctx := context.Background()
	b.ResetTimer()
	// The variants take turns in every iteration, so that a machine shared
	// with other work slows them alike.
	for range b.N {
		for _, v := range vs {
			b.StopTimer()
			execSQL(b, v.dsn, `TRUNCATE bench_sink; DELETE FROM ehsink_watermarks`)
			if v.deletes {
				execSQL(b, v.dsn, `TRUNCATE ehsink_tombstones_bench_sink`)
				execSQL(b, v.dsn, `INSERT INTO ehsink_tombstones_bench_sink (order_id, _ehsink_partition, _ehsink_seq)
					SELECT k, '9', 0 FROM generate_series(0, $1::bigint - 1) AS k`, int64(keys))
				execSQL(b, v.dsn, `ANALYZE ehsink_tombstones_bench_sink`)
			}
			w, _, err := v.s.Open(ctx, "0")
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start := time.Now()
			for i := 0; i < len(v.evs); i += benchBatch {
				if err := w.Write(ctx, v.evs[i:i+benchBatch]); err != nil {
					b.Fatal(err)
				}
				if _, err := w.Flush(ctx); err != nil {
					b.Fatal(err)
				}
			}
			v.took += time.Since(start)
			w.Close(ctx)
		}
	}
	for _, v := range vs {
		b.ReportMetric(float64(b.N*benchEvents)/v.took.Seconds(), v.name+"-events/s")
	}
}
