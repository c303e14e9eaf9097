package connector_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestFilterAndExplodeRealPath sends platform-log events with the SDK to an
// emulator, runs a PostgreSQL and a Parquet connector that filter and
// explode them, and reads back the rows (the Parquet files with arrow-go),
// the dead letters and the checkpoints: every element written once, the
// dropped events never written nor dead-lettered but checkpointed past
// (the last event of each partition is one).
func TestFilterAndExplodeRealPath(t *testing.T) {
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	addr, conn := startHub(t, "logs", 2, "parquet")

	const n = 58 // the last event, 57, is one the filter drops
	partitions := []string{"0", "1"}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	for _, p := range partitions {
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &p})
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := batch.AddEventData(testenv.LogEvent(i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	source := `{connection: "` + conn + `", CG batch: {max_events: 25, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}`
	shape := `
    filter: ` + testenv.LogFilter
	yaml := `
drain_timeout: 10s
connectors:
  - name: logs-pg
    source: ` + strings.Replace(source, "CG ", "", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}` + shape + `
    sink:
      type: postgres
      dsn: "` + dsn + `"
      table: public.records
      create_table: true
      explode: $.records
      columns:
        - {name: part, from: "@partition"}
        - {name: seq, from: "@sequence_number"}
        - {name: idx, from: "@index"}
        - {name: v, from: $.v, type: integer}
  - name: logs-pq
    source: ` + strings.Replace(source, "CG ", "consumer_group: parquet, ", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}` + shape + `
    sink:
      type: parquet
      dir: ` + filepath.Join(dir, "parquet") + `
      max_rows: 40
      max_age: 300ms
      explode: $.records
      columns:
        - {name: part, from: "@partition"}
        - {name: seq, from: "@sequence_number"}
        - {name: idx, from: "@index"}
        - {name: v, from: $.v, type: int32}
`
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(slog.DiscardHandler)})
	defer stop()
	want, dead, dropped := testenv.LogWant(partitions, n)
	for _, name := range []string{"logs-pg", "logs-pq"} {
		waitUntil(t, ctx, done, name+" drops the filtered events and checkpoints the last one", func() bool {
			return sumMetric(t, reg, "ehsink_events_filtered_total", name) >= float64(dropped) &&
				sumMetric(t, reg, "ehsink_checkpoint_sequence_number", name) >= float64(len(partitions)*(n-1))
		})
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, name := range []string{"logs-pg", "logs-pq"} {
		if got := sumMetric(t, reg, "ehsink_events_filtered_total", name); got != float64(dropped) {
			t.Errorf("%s: ehsink_events_filtered_total = %v, want %d", name, got, dropped)
		}
	}

	// PostgreSQL: the rows and the dead letters.
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	pgRows, err := pgx.CollectRows(must(db.Query(ctx, `SELECT part || '/' || seq || '/' || idx FROM public.records WHERE v = idx ORDER BY 1`)), pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pgRows)
	if !slices.Equal(pgRows, want) {
		t.Errorf("PostgreSQL holds %d rows, want %d: %v", len(pgRows), len(want), pgRows)
	}
	pgDead, err := pgx.CollectRows(must(db.Query(ctx, `SELECT partition_id || '/' || sequence_number || ': ' || reason FROM ehsink_dead_letters ORDER BY 1`)), pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	wantDead(t, "PostgreSQL", pgDead, dead)

	// Parquet: the rows, read with arrow-go, and the dead-letter files.
	var pqRows, pqDead []string
	err = filepath.WalkDir(filepath.Join(dir, "parquet"), func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case strings.HasSuffix(path, ".parquet"):
			pqRows = append(pqRows, readRecordsParquet(t, path)...)
		case strings.HasSuffix(path, ".jsonl"):
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
				var l record.DeadLetter
				if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
					return err
				}
				pqDead = append(pqDead, fmt.Sprintf("%s/%d: %s", l.Partition, l.SequenceNumber, l.Reason))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(pqRows)
	slices.Sort(pqDead)
	if !slices.Equal(pqRows, want) {
		t.Errorf("Parquet holds %d rows, want %d: %v", len(pqRows), len(want), pqRows)
	}
	wantDead(t, "Parquet", pqDead, dead)

	// The checkpoints are the last event of each partition, a dropped one.
	for _, consumerGroup := range []string{"$default", "parquet"} {
		store, err := connector.NewCheckpointStore(ctx, cfg.Connectors[0].Checkpoint, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cps, err := store.ListCheckpoints(ctx, addr, "logs", consumerGroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != len(partitions) {
			t.Fatalf("%s: %d checkpoints, want %d", consumerGroup, len(cps), len(partitions))
		}
		for _, cp := range cps {
			if cp.SequenceNumber == nil || *cp.SequenceNumber != n-1 {
				t.Errorf("%s partition %s: checkpoint %v, want %d (the last event, dropped)", consumerGroup, cp.PartitionID, cp.SequenceNumber, n-1)
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// wantDead checks the dead letters "partition/seq: reason" against the
// events of want: the body that is not JSON (named by the filter) and the
// record that does not convert (named by its index), once each.
func wantDead(t *testing.T, where string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s dead letters %q, want %q", where, got, want)
	}
	for i, w := range want {
		reason := "filter.keep: unknown: $.records reads a body that is not JSON"
		if strings.HasSuffix(w, "/30") {
			reason = `element 1: column "v": "x" is not a number`
		}
		if !strings.HasPrefix(got[i], w+": "+reason) {
			t.Errorf("%s dead letter %q, want %q", where, got[i], w+": "+reason)
		}
	}
}

// readRecordsParquet reads the part, seq and idx columns of a file with
// arrow-go's reader (parquetRows) as "part/seq/idx", checking v == idx.
func readRecordsParquet(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for r, row := range parquetRows(t, path) {
		part, seq, idx, v := row["part"].(string), row["seq"].(int64), row["idx"].(int64), row["v"].(int32)
		if int64(v) != idx {
			t.Fatalf("%s: row %d has v %d for index %d", path, r, v, idx)
		}
		out = append(out, fmt.Sprintf("%s/%d/%d", part, seq, idx))
	}
	return out
}
