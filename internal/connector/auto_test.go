package connector_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/avro"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/schemaregistry"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks/table"
)

// The three versions of the schema TestAutoColumnsFollowTheSchema's
// producer writes: v2 adds channel with a default, v3 drops the optional
// note.
const (
	autoV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"note","type":["null","string"],"default":null}]}`
	autoV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"channel","type":"string","default":"web"}]}`
	autoV3 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"channel","type":"string","default":"web"}]}`
)

// TestAutoColumnsFollowTheSchema: a connector with columns: auto and no
// reader schema waits for its subject's first schema, creates the table
// with the columns v1 derives, adds channel when the first v2 event
// arrives (a restart re-derives the columns and the sink's evolve adds
// it before that event is written), and keeps note when v3 drops it.
// Every event is a row once, with the values it was sent with. It runs
// with the Azure registry (content type avro/binary+ID) and with the
// Confluent one (framed bodies, the subject's latest version).
func TestAutoColumnsFollowTheSchema(t *testing.T) {
	for _, confluent := range []bool{false, true} {
		t.Run(map[bool]string{false: "azure", true: "confluent"}[confluent], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			dir := t.TempDir()
			dsn, db := newPostgres(t, ctx)
			send, done := runAuto(t, ctx, dir, 1, confluent, `
      type: postgres
      dsn: "`+dsn+`"
      table: public.orders
      create_table: true
      columns: auto`)
			count := func() int {
				var n int
				// The table does not exist until the connector derived its columns.
				if err := db.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'orders'`).Scan(&n); err != nil || n == 0 {
					return 0
				}
				if err := db.QueryRow(ctx, `SELECT count(*) FROM public.orders`).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			columns := func() string {
				rows, err := db.Query(ctx, `SELECT column_name || ' ' || data_type || ' ' || is_nullable FROM information_schema.columns
					WHERE table_schema = 'public' AND table_name = 'orders' ORDER BY ordinal_position`)
				if err != nil {
					t.Fatal(err)
				}
				cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				return strings.Join(cols, "\n")
			}

			const v1Columns = `partition text NO
seq bigint NO
enqueued_at timestamp with time zone NO
id bigint YES
amount numeric YES
placed timestamp with time zone YES
note text YES`
			sendAutoVersions(t, ctx, send, done, count, func(version int) {
				want := map[int]string{1: v1Columns, 2: v1Columns + "\nchannel text YES", 3: v1Columns + "\nchannel text YES"}[version]
				if got := columns(); got != want {
					t.Fatalf("columns after v%d:\n%s\nwant\n%s", version, got, want)
				}
			})
			rows, err := db.Query(ctx, `SELECT format('%s %s %s %s %s %s', seq, id, amount, placed AT TIME ZONE 'UTC', coalesce(note, '-'), coalesce(channel, '-'))
				FROM public.orders ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for i, v := range []string{"10.50 %s first -", "-3.00 %s - -", "1.25 %s third app", "2.00 %s - web", "5.55 %s - pos", "6.00 %s - web"} {
				want = append(want, fmt.Sprintf("%d %d "+v, i, i+1, fmt.Sprintf("2024-05-01 12:00:00.00%d", i+1)))
			}
			if !slices.Equal(got, want) {
				t.Errorf("rows:\n%s\nwant (each event once):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// newPostgres makes a database of the test's PostgreSQL and connects to
// it until the test ends.
func newPostgres(t *testing.T, ctx context.Context) (string, *pgx.Conn) {
	t.Helper()
	dsn := testenv.Postgres(t).NewDatabase(t)
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.WithoutCancel(ctx)) })
	return dsn, db
}

// runAuto runs a connector reading Avro from an emulator hub of
// partitions partitions, with sink as its sink block (columns: auto),
// until the test ends; send registers a schema (as shop.Order in group
// shop, the connector's subject; with confluent, in subject orders-value
// of the emulator's Confluent registry, the events framed as Kafka
// clients frame them) and sends orders written with it, the i-th to
// partition i modulo partitions, one batch per partition.
func runAuto(t *testing.T, ctx context.Context, dir string, partitions int, confluent bool, sink string) (send func(schema string, orders ...string), done <-chan error) {
	t.Helper()
	cfg, _, _ := loadWithMetrics(t, dir, `
drain_timeout: 5s
emulator: {hubs: {orders: `+strconv.Itoa(partitions)+`}}
connectors:
  - name: auto
    source:
      connection: emulator
      eventhub: orders
      format: avro
      registry: `+map[bool]string{false: "{type: azure, group: shop, subject: shop.Order}", true: "{type: confluent, subject: orders-value}"}[confluent]+`
      batch: {max_events: 10, max_wait: 100ms}
    checkpoint: {file: {dir: `+filepath.Join(dir, "checkpoints")+`}}
    errors: {retry: {initial_backoff: 20ms, max_backoff: 200ms}}
    sink:`+sink+"\n")
	dev := capturingDevEnv{started: make(chan *emulator.Server, 1)}
	runDone, stop := runInBackground(ctx, cfg, connector.RunOptions{DevEnv: dev, Logger: replicaLogs(t)})
	t.Cleanup(func() {
		stop()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	srv, hc := emulatorOf(t, dev, runDone)
	azure, err := schemaregistry.NewAzure(srv.SchemaRegistryAddr(), nil, hc)
	if err != nil {
		t.Fatal(err)
	}
	kafka, err := schemaregistry.NewConfluent("https://"+srv.SchemaRegistryAddr(), "", "", hc)
	if err != nil {
		t.Fatal(err)
	}
	// register returns the event's content type and the framing its body
	// starts with.
	register := func(schema string) (*string, []byte) {
		if confluent {
			id, err := kafka.Register(ctx, "orders-value", schema)
			if err != nil {
				t.Fatal(err)
			}
			return nil, binary.BigEndian.AppendUint32([]byte{0}, uint32(id))
		}
		id, err := azure.Register(ctx, "shop", "shop.Order", schema)
		if err != nil {
			t.Fatal(err)
		}
		ct := schemaregistry.AzureContentTypePrefix + id
		return &ct, nil
	}
	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { producer.Close(context.WithoutCancel(ctx)) })
	return func(schema string, orders ...string) {
		t.Helper()
		ct, framing := register(schema)
		parsed, err := avro.ParseSchema(schema)
		if err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			pid := strconv.Itoa(p)
			batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &pid})
			if err != nil {
				t.Fatal(err)
			}
			for i := p; i < len(orders); i += partitions {
				body, err := avro.Encode(parsed, []byte(orders[i]))
				if err != nil {
					t.Fatal(err)
				}
				body = append(slices.Clip(framing), body...)
				if err := batch.AddEventData(&azeventhubs.EventData{Body: body, ContentType: ct}, nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
				t.Fatal(err)
			}
		}
	}, runDone
}

// TestAutoColumnsPartitions: with four partitions, a v2 event in each
// (channel added) makes one partition ask for the restart while the
// others drain, each perhaps holding its own v2 batch: every event is
// still one row, channel filled, whichever partition saw it first.
func TestAutoColumnsPartitions(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dsn, db := newPostgres(t, ctx)
	send, done := runAuto(t, ctx, t.TempDir(), 4, false, `
      type: postgres
      dsn: "`+dsn+`"
      table: public.orders
      create_table: true
      columns: auto`)
	rows := func() []string {
		r, err := db.Query(ctx, `SELECT format('%s/%s id=%s channel=%s', partition, seq, id, coalesce(channel, '-')) FROM public.orders ORDER BY id`)
		if err != nil {
			return nil // no table yet, or no channel column yet
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			return nil
		}
		return out
	}
	const n = 40
	var v1, v2 []string
	for i := range n {
		v1 = append(v1, fmt.Sprintf(`{"id":%d,"amount":1,"placed":0}`, i))
		v2 = append(v2, fmt.Sprintf(`{"id":%d,"amount":2,"placed":0,"channel":"c%d"}`, n+i, n+i))
	}
	send(autoV1, v1...)
	send(autoV2, v2...)
	waitUntil(t, ctx, done, "every event committed", func() bool { return len(rows()) >= 2*n })
	got := rows()
	if len(got) != 2*n {
		t.Fatalf("%d rows, want %d (each event once):\n%s", len(got), 2*n, strings.Join(got, "\n"))
	}
	for i, r := range got {
		// Partition p got orders p, p+4, ...: its k-th is seq k.
		var p, seq, id int
		var channel string
		if _, err := fmt.Sscanf(r, "%d/%d id=%d channel=%s", &p, &seq, &id, &channel); err != nil {
			t.Fatalf("row %q: %v", r, err)
		}
		wantChannel := "-"
		if i >= n {
			wantChannel = fmt.Sprintf("c%d", i)
		}
		k := i % n / 4
		if i >= n {
			k += n / 4
		}
		if id != i || p != i%4 || seq != k || channel != wantChannel {
			t.Errorf("row %d: %q, want %d/%d id=%d channel=%s", i, r, i%4, k, i, wantChannel)
		}
	}
}

// sendAutoVersions sends two orders written with each schema version in
// turn, and after each pair waits until count says it is committed and
// calls check with the version (1, 2, 3).
func sendAutoVersions(t *testing.T, ctx context.Context, send func(string, ...string), done <-chan error, count func() int, check func(version int)) {
	t.Helper()
	for i, v := range []struct {
		schema string
		orders []string
	}{
		{autoV1, []string{`{"id":1,"amount":10.50,"placed":"2024-05-01T12:00:00.001Z","note":"first"}`,
			`{"id":2,"amount":-3.00,"placed":"2024-05-01T12:00:00.002Z","note":null}`}},
		{autoV2, []string{`{"id":3,"amount":1.25,"placed":"2024-05-01T12:00:00.003Z","note":"third","channel":"app"}`,
			`{"id":4,"amount":2,"placed":"2024-05-01T12:00:00.004Z"}`}},
		{autoV3, []string{`{"id":5,"amount":5.55,"placed":"2024-05-01T12:00:00.005Z","channel":"pos"}`,
			`{"id":6,"amount":6,"placed":"2024-05-01T12:00:00.006Z"}`}},
	} {
		send(v.schema, v.orders...)
		waitUntil(t, ctx, done, fmt.Sprintf("the 2 v%d rows committed", i+1), func() bool { return count() == 2*(i+1) })
		check(i + 1)
	}
}

// TestAutoColumnsLoad: columns: auto is refused where no schema states
// the columns (a JSON connector), needs a subject without a reader
// schema, and with a reader schema is derived at load, so that validate
// checks (and prints) the columns the sink will have.
func TestAutoColumnsLoad(t *testing.T) {
	dir := t.TempDir()
	reader := filepath.Join(dir, "order.avsc")
	if err := os.WriteFile(reader, []byte(autoV2), 0o600); err != nil {
		t.Fatal(err)
	}
	load := func(source, sink string) (*connector.Config, error) {
		path := filepath.Join(dir, "connectors.yaml")
		yaml := `
emulator: {hubs: {orders: 1}}
connectors:
  - name: orders-auto
    source: {connection: emulator, eventhub: orders` + source + `}
    sink: {type: postgres, dsn: "postgres://u@h/db", table: orders` + sink + `}
`
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return connector.Load(path, connector.LoadOptions{Getenv: func(string) string { return "" }})
	}
	for _, tc := range []struct {
		name, source, sink, want string
	}{
		{"json", "", ", columns: auto", `connectors[0].sink.columns: auto: connector "orders-auto" reads JSON events`},
		{"no subject", ", format: avro, registry: {type: confluent}", ", columns: auto", "connectors[0].source.registry.subject: required with columns: auto"},
		{"flatten alone", "", ", columns: {id: $.id}, flatten: true", "connectors[0].sink.flatten: used only with columns: auto"},
		{"routes", ", format: avro, registry: {type: confluent, subject: s}", ", columns: auto, routes: []", "connectors[0].sink.columns: auto is for a sink without routes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.source, tc.sink)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Run("reader schema", func(t *testing.T) {
		cfg, err := load(", format: avro, registry: {type: azure, reader_schema: "+reader+"}", ", columns: auto, flatten: true")
		if err != nil {
			t.Fatal(err)
		}
		shape, err := cfg.Connectors[0].Sink.Config.(table.Shaper).TableShape()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range shape.Routes[0].Columns {
			got = append(got, fmt.Sprintf("%s %s %s %v", c.Name, c.From, c.Type, c.Nullable))
		}
		want := []string{"partition @partition string false", "seq @sequence_number int64 false", "enqueued_at @enqueued_time timestamp false",
			"id $.id int64 false", "amount $.amount decimal(10,2) false", "placed $.placed timestamp(ms) false", "note $.note string true", "channel $.channel string false"}
		if !slices.Equal(got, want) {
			t.Errorf("columns:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestAutoColumnsParquet: the same three schema versions into Parquet
// files with columns: auto, read back by arrow-go: the files written
// before the first v2 event lack channel, the ones from it on carry it
// (and note, which v3 dropped, as null), and every event is one row.
func TestAutoColumnsParquet(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "parquet")
	send, done := runAuto(t, ctx, dir, 1, false, `
      type: parquet
      dir: `+out+`
      max_rows: 2
      columns: auto`)
	// read returns the rows of every committed file, by seq, each with
	// the fields of its file.
	read := func() map[int64]string {
		rows := map[int64]string{}
		_ = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || filepath.Ext(path) != ".parquet" {
				return nil
			}
			tb, err := parquettest.ReadFile(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			var fields []string
			for _, f := range tb.Fields {
				fields = append(fields, f.Name)
			}
			for _, r := range tb.Rows {
				seq := r["seq"].(int64)
				if _, dup := rows[seq]; dup {
					t.Errorf("seq %d is in two rows", seq)
				}
				rows[seq] = fmt.Sprintf("id=%v amount=%v note=%v channel=%v fields=%s", r["id"], r["amount"], r["note"], r["channel"], strings.Join(fields, ","))
			}
			return nil
		})
		return rows
	}
	sendAutoVersions(t, ctx, send, done, func() int { return len(read()) }, func(int) {})

	const v1, v2 = "partition,seq,enqueued_at,id,amount,placed,note", "partition,seq,enqueued_at,id,amount,placed,note,channel"
	want := map[int64]string{
		0: "id=1 amount=1050e-2 note=first channel=<nil> fields=" + v1,
		1: "id=2 amount=-300e-2 note=<nil> channel=<nil> fields=" + v1,
		2: "id=3 amount=125e-2 note=third channel=app fields=" + v2,
		3: "id=4 amount=200e-2 note=<nil> channel=web fields=" + v2,
		4: "id=5 amount=555e-2 note=<nil> channel=pos fields=" + v2,
		5: "id=6 amount=600e-2 note=<nil> channel=web fields=" + v2,
	}
	got := read()
	for seq, w := range want {
		if got[seq] != w {
			t.Errorf("seq %d: %s\nwant        %s", seq, got[seq], w)
		}
	}
}
