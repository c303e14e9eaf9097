package postgres

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

const (
	benchEvents = 100_000
	benchBatch  = 1000 // events per Write+Flush, and rows per raw CopyFrom
)

// benchBody is about 200 bytes of JSON, 8 columns' worth once with the
// sequence number.
func benchBody(i int) []byte {
	return fmt.Appendf(nil, `{"order_id":%d,"customer":{"id":"cust-%05d","tier":"gold"},"amount":"%d.%02d","qty":%d,"price":%d.5,"created_at":"2026-01-02T03:04:%02d.%03dZ","paid":%t,"note":"leave it at the door, thanks"}`,
		i, i%5000, i%100000, i%100, i%10+1, i%1000, i%60, i%1000, i%3 == 0)
}

func benchColumns(b *testing.B) mapping.Columns {
	b.Helper()
	var cs mapping.Columns
	err := cs.UnmarshalConfig([]any{
		map[string]any{"name": "order_id", "from": "$.order_id", "type": "bigint", "nullable": false},
		map[string]any{"name": "customer", "from": "$.customer.id", "type": "text"},
		map[string]any{"name": "amount", "from": "$.amount", "type": "numeric(12,2)"},
		map[string]any{"name": "qty", "from": "$.qty", "type": "integer"},
		map[string]any{"name": "price", "from": "$.price", "type": "double precision"},
		map[string]any{"name": "created_at", "from": "$.created_at", "type": "timestamptz"},
		map[string]any{"name": "paid", "from": "$.paid", "type": "boolean"},
		map[string]any{"name": "seq", "from": "@sequence_number"},
	})
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

const benchColumnsDDL = `order_id bigint NOT NULL, customer text, amount numeric(12,2), qty integer, price double precision,
	created_at timestamptz, paid boolean, seq bigint NOT NULL`

// BenchmarkSinkVsCopy writes 100,000 events through the sink (Write+Flush
// per batch of 1,000, as the runner drives it) and copies the same rows,
// mapped beforehand, with raw pgx.CopyFrom into a same-shaped table, in
// the same run and batch sizes. It reports both rates, their ratio, and
// the sink's allocations per row (mapping included).
func BenchmarkSinkVsCopy(b *testing.B) {
	events := make([]sinks.Event, benchEvents)
	enq := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range events {
		events[i] = sinks.Event{Partition: "0", SequenceNumber: int64(i), Offset: fmt.Sprint(i * 300), EnqueuedTime: enq, Body: benchBody(i)}
	}
	for _, mode := range []string{modeAppend, modeUpsert} {
		b.Run(mode, func(b *testing.B) {
			dsn := newDB(b)
			cols := benchColumns(b)
			pk := ""
			if mode == modeUpsert {
				pk = ", PRIMARY KEY (order_id)"
				execSQL(b, dsn, `CREATE TABLE bench_sink (`+benchColumnsDDL+`, _ehsink_partition text, _ehsink_seq bigint`+pk+`)`)
			} else {
				execSQL(b, dsn, `CREATE TABLE bench_sink (`+benchColumnsDDL+`)`)
			}
			execSQL(b, dsn, `CREATE TABLE bench_raw (`+benchColumnsDDL+pk+`)`)
			cfg := &sinkConfig{DSN: secret.String(dsn), Table: "bench_sink", Mode: mode, Columns: cols, PoolSize: 1}
			if mode == modeUpsert {
				cfg.Key = []string{"order_id"}
			}
			s := newTestSink(b, cfg)

			// The raw side gets the same rows, mapped and converted up front.
			prepared := make([][]any, len(events))
			for i := range events {
				prepared[i] = make([]any, len(cols))
				d := s.routes[0].static
				rows, err := d.r.mapper.Rows(&events[i])
				if err == nil {
					err = convert(d, rows, 0, prepared[i])
					rows.Close()
				}
				if err != nil {
					b.Fatal(err)
				}
				// What a pgx user would hand CopyFrom for a numeric.
				dec := prepared[i][2].(mapping.Decimal)
				prepared[i][2] = pgtype.Numeric{Int: dec.BigInt(), Exp: -dec.Scale, Valid: true}
			}
			ctx := context.Background()
			raw, err := pgx.Connect(ctx, dsn)
			if err != nil {
				b.Fatal(err)
			}
			defer raw.Close(ctx)

			var sinkTime, rawTime time.Duration
			var mallocs uint64
			var ms runtime.MemStats
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				execSQL(b, dsn, `TRUNCATE bench_sink, bench_raw; DELETE FROM ehsink_watermarks`)
				b.StartTimer()

				start := time.Now()
				for i := 0; i < len(prepared); i += benchBatch {
					if _, err := raw.CopyFrom(ctx, pgx.Identifier{"bench_raw"}, cols.Names(), pgx.CopyFromRows(prepared[i:i+benchBatch])); err != nil {
						b.Fatal(err)
					}
				}
				rawTime += time.Since(start)

				w, _, err := s.Open(ctx, "0")
				if err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&ms)
				before := ms.Mallocs
				start = time.Now()
				for i := 0; i < len(events); i += benchBatch {
					if err := w.Write(ctx, events[i:i+benchBatch]); err != nil {
						b.Fatal(err)
					}
					if _, err := w.Flush(ctx); err != nil {
						b.Fatal(err)
					}
				}
				sinkTime += time.Since(start)
				runtime.ReadMemStats(&ms)
				mallocs += ms.Mallocs - before
				w.Close(ctx)
			}
			rows := float64(b.N * benchEvents)
			sinkRate, rawRate := rows/sinkTime.Seconds(), rows/rawTime.Seconds()
			b.ReportMetric(sinkRate, "sink-rows/s")
			b.ReportMetric(rawRate, "copy-rows/s")
			b.ReportMetric(sinkRate/rawRate, "ratio")
			b.ReportMetric(float64(mallocs)/rows, "sink-allocs/row")
			b.ReportMetric(0, "ns/op")
		})
	}
}
