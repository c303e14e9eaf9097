package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestConditionsOnEmptyBodies runs two connectors to PostgreSQL in an
// `ehsink run` process over events whose bodies are not JSON:
//   - the README's delete example (`$.op == 'd' or @body == ”`) deletes on
//     an empty tombstone, although its left side cannot read the body, and
//     a body that is plain text, for which the condition stays unknown, is
//     dead-lettered with the reason;
//   - a Debezium connector with a filter that reads the body handles an
//     empty tombstone (skips it) instead of dead-lettering it.
func TestConditionsOnEmptyBodies(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	pg := testenv.NewPostgres(t)
	dsn := pg.NewDatabase(t)
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: 1}, {Name: "customers", Partitions: 1}}})
	type event struct{ key, body string }
	send := func(hub string, events []event) {
		t.Helper()
		producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString(hub), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer producer.Close(context.Background())
		p := "0"
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &p})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			ev := &azeventhubs.EventData{Body: []byte(e.body)}
			if e.key != "" {
				ev.Properties = map[string]any{"key": e.key}
			}
			if err := batch.AddEventData(ev, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	orders := []event{
		{"1", `{"order_id": 1, "status": "new"}`},
		{"2", `{"order_id": 2, "status": "new"}`},
		{"3", `{"order_id": 3, "status": "new"}`},
		{"1", ``},                           // an empty tombstone: deletes order 1
		{"3", `{"order_id": 3, "op": "d"}`}, // a delete by op
		{"2", `not json`},                   // unknown: dead-lettered
	}
	send("orders", orders)
	customers := []string{
		`{"before": null, "after": {"id": 1, "v": 10}, "op": "c", "source": {"table": "customers"}}`,
		`{"before": null, "after": {"id": 2, "v": 20}, "op": "c", "source": {"table": "other"}}`,
		``, // a tombstone: skipped, not dead-lettered by the filter
	}
	var cev []event
	for _, b := range customers {
		cev = append(cev, event{body: b})
	}
	send("customers", cev)

	work := t.TempDir()
	ckptDir := filepath.Join(work, "checkpoints")
	source := func(hub string) string {
		return `{connection: "` + srv.ConnectionString(hub) + `", batch: {max_events: 15, max_wait: 100ms}}`
	}
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
connectors:
  - name: orders
    source: `+source("orders")+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.orders
      create_table: true
      mode: upsert
      key: [order_id]
      columns: [{name: order_id, from: $.order_id, type: integer}, {name: status, from: $.status}]
      delete:
        when: "$.op == 'd' or @body == ''"
        key: {order_id: "@properties.key"}
  - name: customers
    source: `+source("customers")+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    filter: {keep: "$.source.table == 'customers'"}
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.customers
      create_table: true
      mode: upsert
      format: debezium
      key: [id]
      columns: [{name: id, from: $.id, type: integer}, {name: v, from: $.v, type: integer}]
`), 0o600); err != nil {
		t.Fatal(err)
	}

	store, err := checkpoint.NewFileStore(ckptDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := func(hub string) string {
		props, err := azeventhubs.ParseConnectionString(srv.ConnectionString(hub))
		if err != nil {
			t.Fatal(err)
		}
		return props.FullyQualifiedNamespace
	}
	checkpointed := func(hub string, last int64) bool {
		cps, err := checkpoint.Lowercase(store, nil).ListCheckpoints(ctx, ns(hub), hub, "$default", nil)
		return err == nil && len(cps) == 1 && cps[0].SequenceNumber != nil && *cps[0].SequenceNumber == last
	}
	r := startReplica(t, "run", cfg)
	waitUntil(t, ctx, "both connectors checkpoint their last event", func() bool {
		return checkpointed("orders", int64(len(orders)-1)) && checkpointed("customers", int64(len(customers)-1))
	}, r)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-r.done

	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	ids := func(table string) []int {
		rows, err := db.Query(ctx, `SELECT `+map[string]string{"orders": "order_id", "customers": "id"}[table]+` FROM public.`+table+` ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := ids("orders"); !slices.Equal(got, []int{2}) {
		t.Errorf("orders holds %v, want [2]: the empty tombstone deletes order 1 and op d order 3", got)
	}
	if got := ids("customers"); !slices.Equal(got, []int{1}) {
		t.Errorf("customers holds %v, want [1]: the filter drops the other table's event", got)
	}
	rows, err := db.Query(ctx, `SELECT connector || ' ' || sequence_number || ': ' || reason FROM ehsink_dead_letters ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	dead, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || !strings.HasPrefix(dead[0], "orders 5: ") ||
		!strings.Contains(dead[0], "delete.when: unknown: $.op reads a body that is not JSON") {
		t.Errorf("dead letters %q, want one: orders 5, its delete condition unknown", dead)
	}
}
