package connector_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/record"
	"github.com/ehsink/ehsink/internal/testenv"
)

// routeType is the type of event i of TestRoutesRealPath ("" for the body
// that is not JSON).
func routeType(i int) string {
	switch {
	case i == 17:
		return ""
	case i%5 == 2:
		return "order_cancelled"
	case i%5 == 3:
		return "heartbeat"
	}
	return "order_created"
}

// TestRoutesRealPath sends order events of three types with the SDK to an
// emulator and runs a routed PostgreSQL connector (created orders and
// cancellations to two tables, nothing else: heartbeats are dead letters)
// and a routed Parquet connector (created orders under created/, the rest
// under other/type=TYPE/). It reads back the two tables, the files of both
// prefixes with arrow-go, the dead letters and the checkpoints: each event
// in its route's destination exactly once, one watermark row per partition
// for both tables.
func TestRoutesRealPath(t *testing.T) {
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	addr, conn := startHub(t, "orders", 2, "parquet")

	const last = 59
	partitions := []string{"0", "1"}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	sendToPartitions(t, ctx, conn, partitions, last, func(p string, i int) *azeventhubs.EventData {
		if routeType(i) == "" {
			return &azeventhubs.EventData{Body: []byte(`not json`)}
		}
		return &azeventhubs.EventData{Body: []byte(fmt.Sprintf(`{"type":%q,"order_id":"%s-%d","reason":"r"}`, routeType(i), p, i))}
	})

	dir := t.TempDir()
	source := `{connection: "` + conn + `", CG batch: {max_events: 25, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}`
	cols := `{part: "@partition", seq: "@sequence_number", order_id: $.order_id}`
	yaml := `
drain_timeout: 10s
connectors:
  - name: orders-pg
    source: ` + strings.Replace(source, "CG ", "", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    sink:
      type: postgres
      dsn: "` + dsn + `"
      create_table: true
      routes:
        - {name: created, when: "$.type == 'order_created'", table: orders, columns: ` + cols + `}
        - {name: cancelled, when: "$.type == 'order_cancelled'", table: public.cancellations, columns: ` + cols + `}
  - name: orders-pq
    source: ` + strings.Replace(source, "CG ", "consumer_group: parquet, ", 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
    sink:
      type: parquet
      dir: ` + filepath.Join(dir, "parquet") + `
      max_rows: 30
      max_age: 300ms
      routes:
        - {when: "$.type == 'order_created'", path: "created/{partition}-{first_seq:020}-{last_seq:020}.parquet", columns: ` + cols + `}
        - {path: "other/type={$.type}/{partition}-{first_seq:020}-{last_seq:020}.parquet", columns: ` + cols + `}
`
	cfg, reg, met := loadWithMetrics(t, dir, yaml)
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(slog.DiscardHandler)})
	defer stop()
	for _, name := range []string{"orders-pg", "orders-pq"} {
		waitUntil(t, ctx, done, name+" checkpoints the last events", func() bool {
			return sumMetric(t, reg, "ehsink_checkpoint_sequence_number", name) >= float64(2*last)
		})
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	// want lists "partition/seq" of the events of the given types.
	want := func(types ...string) []string {
		var out []string
		for _, p := range partitions {
			for i := 0; i <= last; i++ {
				if slices.Contains(types, routeType(i)) {
					out = append(out, fmt.Sprintf("%s/%d", p, i))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	check := func(where string, got, want []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %d rows, want %d: %v", where, len(got), len(want), got)
		}
	}

	// PostgreSQL: two tables, the dead letters, one watermark per partition.
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	query := func(sql string) []string {
		t.Helper()
		rows, err := pgx.CollectRows(must(db.Query(ctx, sql)), pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	check("table orders", query(`SELECT part || '/' || seq FROM orders WHERE order_id = part || '-' || seq`), want("order_created"))
	check("table cancellations", query(`SELECT part || '/' || seq FROM cancellations WHERE order_id = part || '-' || seq`), want("order_cancelled"))
	check("ehsink_dead_letters", query(`SELECT partition_id || '/' || sequence_number FROM ehsink_dead_letters WHERE table_name = '*' AND (reason LIKE '%no route takes the event%' OR reason LIKE '%invalid JSON%')`), want("heartbeat", ""))
	if wm := query(`SELECT partition_id || '/' || sequence_number FROM ehsink_watermarks WHERE connector = 'orders-pg' ORDER BY 1`); !slices.Equal(wm, []string{"0/59", "1/59"}) {
		t.Errorf("watermark rows %v, want one per partition at 59", wm)
	}

	// Parquet: each prefix read with arrow-go, and the dead letters.
	got := map[string][]string{}
	var dead []string
	root := filepath.Join(dir, "parquet")
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case strings.HasSuffix(path, ".parquet"):
			rel, _ := filepath.Rel(root, path)
			prefix := filepath.Dir(filepath.ToSlash(rel))
			got[prefix] = append(got[prefix], readOrdersParquet(t, path)...)
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
				dead = append(dead, fmt.Sprintf("%s/%d", l.Partition, l.SequenceNumber))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check("created/", got["created"], want("order_created"))
	check("other/type=order_cancelled/", got["other/type=order_cancelled"], want("order_cancelled"))
	check("other/type=heartbeat/", got["other/type=heartbeat"], want("heartbeat"))
	if len(got) != 3 {
		t.Errorf("Parquet folders %v, want created, other/type=order_cancelled and other/type=heartbeat", slices.Sorted(maps.Keys(got)))
	}
	check("Parquet dead letters", dead, want(""))

	wantCheckpoints(t, ctx, cfg, addr, "orders", partitions, last)
}

// sendToPartitions sends event(p, i) for i in 0..last to each partition p,
// in one batch per partition, with the SDK's producer.
func sendToPartitions(t *testing.T, ctx context.Context, conn string, partitions []string, last int, event func(p string, i int) *azeventhubs.EventData) {
	t.Helper()
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
		for i := 0; i <= last; i++ {
			if err := batch.AddEventData(event(p, i), nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// startHub starts an emulator with one hub of partitions and consumer
// groups besides $Default, and returns its address and a connection
// string to the hub.
func startHub(t *testing.T, hub string, partitions int, groups ...string) (addr, conn string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := emulator.New(emulator.Config{Hubs: []emulator.HubConfig{{Name: hub, Partitions: partitions, ConsumerGroups: groups}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	addr = ln.Addr().String()
	return addr, "Endpoint=sb://" + addr + ";SharedAccessKeyName=k;SharedAccessKey=v;EntityPath=" + hub + ";UseDevelopmentEmulator=true"
}

// wantCheckpoints checks that the checkpoint store of cfg's first
// connector holds the last event of each partition, for $Default and the
// parquet consumer group.
func wantCheckpoints(t *testing.T, ctx context.Context, cfg *connector.Config, addr, hub string, partitions []string, last int64) {
	t.Helper()
	for _, consumerGroup := range []string{"$default", "parquet"} {
		store, err := connector.NewCheckpointStore(ctx, cfg.Connectors[0].Checkpoint, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cps, err := store.ListCheckpoints(ctx, addr, hub, consumerGroup, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != len(partitions) {
			t.Fatalf("%s: %d checkpoints, want %d", consumerGroup, len(cps), len(partitions))
		}
		for _, cp := range cps {
			if cp.SequenceNumber == nil || *cp.SequenceNumber != last {
				t.Errorf("%s partition %s: checkpoint %v, want %d", consumerGroup, cp.PartitionID, cp.SequenceNumber, last)
			}
		}
	}
}

// parquetRows reads a Parquet file with arrow-go's reader (parquettest),
// not the writer's library.
func parquetRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	tb, err := parquettest.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tb.Rows
}

// readOrdersParquet reads the part, seq and order_id columns of a file
// with arrow-go's reader as "part/seq", checking order_id.
func readOrdersParquet(t *testing.T, path string) []string {
	t.Helper()
	var out []string
	for r, row := range parquetRows(t, path) {
		part, seq, id := row["part"].(string), row["seq"].(int64), row["order_id"].(string)
		if want := fmt.Sprintf("%s-%d", part, seq); id != want {
			t.Fatalf("%s: row %d has order_id %s, want %s", path, r, id, want)
		}
		out = append(out, fmt.Sprintf("%s/%d", part, seq))
	}
	return out
}
