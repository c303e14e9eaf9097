package connector_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestAvroDeadLetterKeepsTheEventAsReceived: Avro events that decode but
// that PostgreSQL's sink refuses, one at Write (an amount beyond its
// column's precision) and one at commit (a CHECK of the table), are
// dead letters holding the event as received: the Avro bytes (not the
// JSON the mapping read), the content type that names the schema
// (avro/binary+ID), the properties, the position and enqueued time, with
// the reason, the connector and the time. The partition goes on.
func TestAvroDeadLetterKeepsTheEventAsReceived(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	dsn := testenv.Postgres(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	if _, err := db.Exec(ctx, `CREATE TABLE public.orders (id bigint NOT NULL CHECK (id > 0), amount numeric(5,2))`); err != nil {
		t.Fatal(err)
	}
	cfg, _, _ := loadWithMetrics(t, dir, `
drain_timeout: 5s
emulator: {hubs: {orders: 1}}
connectors:
  - name: avro-pg
    source: {connection: emulator, eventhub: orders, format: avro, registry: {type: azure}, batch: {max_events: 10, max_wait: 100ms}}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    sink:
      type: postgres
      dsn: "`+dsn+`"
      table: public.orders
      columns:
        id: {from: $.id, type: bigint}
        amount: {from: $.amount, type: "numeric(5,2)"}
`)
	dev := capturingDevEnv{started: make(chan *emulator.Server, 1)}
	done, stop := runInBackground(ctx, cfg, connector.RunOptions{DevEnv: dev, Logger: replicaLogs(t)})
	defer func() {
		stop()
		<-done
	}()
	srv, hc := emulatorOf(t, dev, done)
	client, err := schemaregistry.NewAzure(srv.SchemaRegistryAddr(), nil, hc)
	if err != nil {
		t.Fatal(err)
	}
	const schema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`
	id, err := client.Register(ctx, "orders", "Order", schema)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := avro.ParseSchema(schema)
	ct := schemaregistry.AzureContentTypePrefix + id
	bodies := map[int64][]byte{} // by sequence number
	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.WithoutCancel(ctx))
	batch, err := producer.NewEventDataBatch(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for seq, order := range []string{`{"id":1,"amount":10.5}`, `{"id":2,"amount":123456.78}`, `{"id":-3,"amount":1}`, `{"id":4,"amount":2}`} {
		body, err := avro.Encode(parsed, []byte(order))
		if err != nil {
			t.Fatal(err)
		}
		bodies[int64(seq)] = body
		ev := &azeventhubs.EventData{Body: body, ContentType: &ct, Properties: map[string]any{"tenant": "t1", "n": int64(seq)}}
		if err := batch.AddEventData(ev, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := db.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	waitUntil(t, ctx, done, "2 rows and 2 dead letters committed", func() bool {
		return count(`SELECT count(*) FROM public.orders`) == 2 && count(`SELECT count(*) FROM ehsink_dead_letters`) == 2
	})

	rows, err := db.Query(ctx, `SELECT connector, partition_id, sequence_number, "offset", enqueued_time, content_type, properties, body, reason, failed_at
		FROM ehsink_dead_letters ORDER BY sequence_number`)
	if err != nil {
		t.Fatalf("read the dead letters: %v", err)
	}
	type letter struct {
		Connector, Partition string
		Seq                  int64
		Offset               string
		Enqueued             *time.Time
		ContentType          *string
		Properties           []byte
		Body                 []byte
		Reason               string
		FailedAt             *time.Time
	}
	letters, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (letter, error) {
		var l letter
		err := r.Scan(&l.Connector, &l.Partition, &l.Seq, &l.Offset, &l.Enqueued, &l.ContentType, &l.Properties, &l.Body, &l.Reason, &l.FailedAt)
		return l, err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		seq    int64
		reason string
	}{{1, "amount"}, {2, "check"}} {
		if i >= len(letters) {
			t.Fatalf("%d dead letters, want 2", len(letters))
		}
		l := letters[i]
		if l.Seq != want.seq {
			t.Errorf("dead letter %d is seq %d, want %d", i, l.Seq, want.seq)
			continue
		}
		if string(l.Body) != string(bodies[l.Seq]) {
			t.Errorf("seq %d: body %q, want the Avro bytes as received %x", l.Seq, l.Body, bodies[l.Seq])
		}
		if l.ContentType == nil || *l.ContentType != ct {
			t.Errorf("seq %d: content_type %v, want %q (it names the schema)", l.Seq, l.ContentType, ct)
		}
		var props map[string]any
		if err := json.Unmarshal(l.Properties, &props); err != nil || props["tenant"] != "t1" || props["n"] != float64(l.Seq) {
			t.Errorf("seq %d: properties %s (%v), want tenant t1 and n %d", l.Seq, l.Properties, err, l.Seq)
		}
		if l.Connector != "avro-pg" || l.Partition != "0" || l.Offset == "" || l.Enqueued == nil || l.FailedAt == nil {
			t.Errorf("seq %d: connector %q partition %q offset %q enqueued %v failed_at %v", l.Seq, l.Connector, l.Partition, l.Offset, l.Enqueued, l.FailedAt)
		}
		if !strings.Contains(strings.ToLower(l.Reason), want.reason) {
			t.Errorf("seq %d: reason %q, want it to name %q", l.Seq, l.Reason, want.reason)
		}
	}
}
