package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/testenv"
)

// Debezium change events of inventory.customers, as Debezium's JSON
// converter writes them: with the schema (trimmed to the fields whose
// encoding it explains) or without it.
const customerSchema = `{"type": "struct", "fields": [{"type": "struct", "optional": true, "field": "before", "fields": [{"type": "int32", "field": "id"}]}, ` +
	`{"type": "struct", "optional": true, "field": "after", "fields": [{"type": "int32", "field": "id"}, {"type": "string", "field": "email"}, ` +
	`{"type": "int64", "optional": true, "name": "io.debezium.time.MicroTimestamp", "field": "created_at"}, ` +
	`{"type": "bytes", "optional": true, "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "field": "balance"}]}, ` +
	`{"type": "string", "field": "op"}], "name": "dbserver1.inventory.customers.Envelope"}`

func withSchema(op, before, after string) string {
	return `{"schema": ` + customerSchema + `, "payload": {"before": ` + before + `, "after": ` + after +
		`, "source": {"connector": "postgresql", "table": "customers"}, "op": "` + op + `", "ts_ms": 1772359200250}}`
}

func plain(op, before, after string) string {
	return `{"before": ` + before + `, "after": ` + after + `, "source": {"connector": "postgresql", "table": "customers"}, "op": "` + op + `", "ts_ms": 1772359200250}`
}

// TestDebeziumRealPath sends Debezium change events with the SDK to an
// emulator (both JSON forms, deletes with and without a before image,
// tombstones, a truncate), runs a connector replicating the table into
// PostgreSQL, and reads the table back. A second connector then replays
// the hub into the same table with its deletes filtered out (a consumer
// group that lags, or replays from the start): the rows it would bring
// back are held off by the tombstones, and no row goes back in time.
func TestDebeziumRealPath(t *testing.T) {
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	_, conn := startHub(t, "customers", 2, "replay")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	send := func(opts *azeventhubs.EventDataBatchOptions, bodies ...string) {
		t.Helper()
		batch, err := producer.NewEventDataBatch(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			if err := batch.AddEventData(&azeventhubs.EventData{Body: []byte(b)}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	p0, p1, key20 := "0", "1", `{"id":20}`
	send(&azeventhubs.EventDataBatchOptions{PartitionID: &p0},
		withSchema("r", "null", `{"id": 1, "email": "a1", "created_at": 1772359200123456, "balance": "AeI6"}`),
		plain("c", "null", `{"id": 2, "email": "b2", "created_at": 1772359200123, "balance": "12.50"}`),
		withSchema("u", `{"id": 1}`, `{"id": 1, "email": "a1-new", "created_at": 1772359200123456, "balance": "nA=="}`),
		plain("d", `{"id": 2, "email": null}`, "null"),
		"", // the tombstone after the delete
		plain("c", "null", `{"id": 2, "email": "b2-again", "created_at": null, "balance": null}`),
		plain("t", "null", "null"),
		withSchema("d", `{"id": 3}`, "null"), // a key that is not there
	)
	send(&azeventhubs.EventDataBatchOptions{PartitionID: &p1},
		withSchema("c", "null", `{"id": 10, "email": "c10", "created_at": null, "balance": null}`),
		withSchema("d", `{"id": 10}`, "null"),
		"null",
		plain("c", "null", `{"id": 11, "email": "d11", "created_at": null, "balance": "0.10"}`),
	)
	// Debezium Server sends the record key as the partition key: a delete
	// without a before image takes its key from there.
	send(&azeventhubs.EventDataBatchOptions{PartitionKey: &key20},
		plain("c", "null", `{"id": 20, "email": "e20", "created_at": null, "balance": null}`),
		plain("d", "null", "null"),
		"",
	)
	var lastSum float64
	for _, p := range []string{p0, p1} {
		props, err := producer.GetPartitionProperties(ctx, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		lastSum += float64(props.LastEnqueuedSequenceNumber)
	}

	dir := t.TempDir()
	source := `{connection: "` + conn + `", CG batch: {max_events: 3, max_wait: 200ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 5s}}`
	sink := `
    sink:
      type: postgres
      dsn: "` + dsn + `"
      table: public.customers
      mode: upsert
      format: debezium
      key: [id]
      create_table: true
      columns:
        - {name: id, from: $.id, type: int32}
        - {name: email, from: $.email}
        - {name: created_at, from: $.created_at, type: timestamp}
        - {name: balance, from: $.balance, type: "numeric(10,2)"}`
	run := func(name, cg, filter string) {
		t.Helper()
		yaml := `
drain_timeout: 10s
connectors:
  - name: ` + name + `
    source: ` + strings.Replace(source, "CG ", cg, 1) + `
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}` + filter + sink + "\n"
		cfgDir := filepath.Join(dir, name)
		if err := os.Mkdir(cfgDir, 0o700); err != nil {
			t.Fatal(err)
		}
		cfg, reg, met := loadWithMetrics(t, cfgDir, yaml)
		done, stop := runInBackground(ctx, cfg, connector.RunOptions{Metrics: met, Logger: slog.New(slog.DiscardHandler)})
		defer stop()
		waitUntil(t, ctx, done, name+" checkpoints every event", func() bool {
			return sumMetric(t, reg, "ehsink_checkpoint_sequence_number", name) >= lastSum
		})
		stop()
		if err := <-done; err != nil {
			t.Fatalf("Run %s: %v", name, err)
		}
	}
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	table := func() string {
		t.Helper()
		rows, err := db.Query(ctx, `SELECT id, email, coalesce(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '-'), coalesce(balance::text, '-') FROM public.customers ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for rows.Next() {
			var id int32
			var email, at, balance string
			if err := rows.Scan(&id, &email, &at, &balance); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%d %s %s %s", id, email, at, balance))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	want := strings.Join([]string{
		"1 a1-new 2026-03-01T10:00:00.123456 -1.00", // the schema decodes micros and the decimal
		"2 b2-again - -", // created again after its delete
		"11 d11 - 0.10",
	}, "\n")

	run("customers", "", "")
	if got := table(); got != want {
		t.Fatalf("the replicated table:\n%s\nwant:\n%s", got, want)
	}
	var letters []string
	rows, err := db.Query(ctx, `SELECT reason FROM public.ehsink_dead_letters WHERE connector = 'customers'`)
	if err != nil {
		t.Fatal(err)
	}
	letters, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(letters) != 1 || !strings.Contains(letters[0], `op "t" (truncate)`) {
		t.Fatalf("dead letters %q (%v), want the truncate alone", letters, err)
	}

	// Replay without the deletes: every insert of 10 and 20 is older than
	// their tombstones, every other change older than its row.
	run("replayer", "consumer_group: replay, ", `
    filter: {drop: "$.op == 'd' or $.payload.op == 'd'"}`)
	if got := table(); got != want {
		t.Fatalf("a replay without its deletes changed the table:\n%s\nwant:\n%s", got, want)
	}
}
