package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

// avroPins are the npm packages testdata/avro_produce.js needs, at the
// versions test/scripts/install-tools.sh installs.
var avroPins = map[string]string{
	"@azure/event-hubs":                  "6.0.4",
	"@azure/schema-registry":             "1.3.0",
	"@azure/schema-registry-avro":        "1.1.0",
	"@kafkajs/confluent-schema-registry": "4.1.0",
}

// avroNode finds node and the installed packages; a missing one skips the
// test, or fails it when CI=true.
func avroNode(t *testing.T) (node, modules string) {
	t.Helper()
	missing := func(msg string) {
		t.Helper()
		msg += "; run make tools (test/scripts/install-tools.sh)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true, so this is a failure)")
		}
		t.Skip(msg)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found on PATH")
	}
	modules = filepath.Join(root, ".tools", "node_modules")
	for pkg, version := range avroPins {
		b, err := os.ReadFile(filepath.Join(modules, filepath.FromSlash(pkg), "package.json"))
		var meta struct{ Version string }
		if err != nil || json.Unmarshal(b, &meta) != nil || meta.Version != version {
			missing(fmt.Sprintf("%s@%s is not installed in %s", pkg, version, modules))
		}
	}
	return node, modules
}

// avroWant is record i of testdata/avro_produce.js as a row would hold it,
// read with the reader schema v2 (readerV2) or with its own schema.
func avroWant(i int, readerV2 bool) string {
	note, channel := "<null>", "<null>"
	if i%4 == 3 {
		channel = "store"
		if i%8 == 3 {
			channel = "app"
		}
	} else {
		if i%3 != 0 {
			note = fmt.Sprintf("note %d", i)
		}
		if readerV2 {
			channel = "web" // the reader's default for a v1 event
		}
	}
	if readerV2 {
		note = "<null>" // v2 has no note
	}
	return avroCommon(i) + "|" + note + "|" + channel
}

// avroCommon is what every schema version of record i holds, as
// id|name|amount|placed (Unix ms)|day|ref.
func avroCommon(i int) string {
	cents := (i*137)%100000 - 500
	sign, abs := "", cents
	if cents < 0 {
		sign, abs = "-", -cents
	}
	day := time.Unix(int64(19000+i%30)*86400, 0).UTC()
	return fmt.Sprintf("%d|n-%d|%s%d.%02d|%d|%s|00000000-0000-4000-8000-%012d", i+1, i, sign, abs/100, abs%100,
		1700000000000+int64(i)*1001, day.Format(time.DateOnly), i)
}

const avroV2Schema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},{"name":"name","type":"string"},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"placed","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"ref","type":{"type":"string","logicalType":"uuid"}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"channel","type":"string","default":"web"}]}`

// TestAvroFromJavaScriptProducers: events serialized by the JavaScript
// Schema Registry clients (Azure's Avro serializer, content type
// avro/binary+<id>; kafkajs' Confluent client, framed bodies) against the
// emulator's registries, in two schema versions with poison bodies among
// them, are decoded by `ehsink run` into PostgreSQL and Parquet. The
// process is killed once while it commits; in the end every record is in
// every sink exactly once, equal to what was sent (logical types
// included), each poison event is a dead letter with its reason, and the
// checkpoints reach the last event.
func TestAvroFromJavaScriptProducers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	av := startAvroEnv(t, "avro-az", "avro-kafka", "pq")
	work := t.TempDir()
	v2 := filepath.Join(work, "order-v2.avsc")
	if err := os.WriteFile(v2, []byte(avroV2Schema), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 200 // records per hub, every other one in each partition
	av.produce(t, ctx, n)

	pg := testenv.NewPostgres(t)
	dsnAz, dsnKafka := pg.NewDatabase(t), pg.NewDatabase(t)
	ckptDir, pqAz, pqKafka := filepath.Join(work, "checkpoints"), filepath.Join(work, "pq-az"), filepath.Join(work, "pq-kafka")
	source, azure, confluent := av.source, av.azureRegistry(""), av.confluentRegistry("")
	pgColumns := `[{name: id, from: $.id, type: bigint, nullable: false}, {name: name, from: $.name}, {name: amount, from: $.amount, type: "numeric(12,2)"},
        {name: placed, from: $.placed, type: timestamp}, {name: day, from: $.day, type: timestamp}, {name: ref, from: $.ref, type: uuid},
        {name: note, from: $.note}, {name: channel, from: $.channel}]`
	pqColumns := strings.Replace(pgColumns, "type: uuid", "type: string", 1)
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: avro-az-pg
    source: `+source("avro-az", "", av.azureRegistry(`, reader_schema: `+v2))+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    sink: {type: postgres, dsn: "`+dsnAz+`", table: public.orders, create_table: true, columns: `+pgColumns+`}
  - name: avro-az-pq
    source: `+source("avro-az", "pq", azure)+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    sink: {type: parquet, dir: `+pqAz+`, max_rows: 40, max_age: 200ms, columns: `+pqColumns+`}
  - name: avro-kafka-pg
    source: `+source("avro-kafka", "", confluent)+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    sink: {type: postgres, dsn: "`+dsnKafka+`", table: public.orders, create_table: true, columns: `+pgColumns+`}
  - name: avro-kafka-pq
    source: `+source("avro-kafka", "pq", confluent)+`
    checkpoint: {file: {dir: `+ckptDir+`}}
    sink: {type: parquet, dir: `+pqKafka+`, max_rows: 40, max_age: 200ms, columns: `+pqColumns+`}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	dbAz, dbKafka := connect(t, ctx, dsnAz), connect(t, ctx, dsnKafka)
	count := func(db *pgx.Conn) int {
		var c int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM public.orders`).Scan(&c); err != nil {
			return 0 // created by the run
		}
		return c
	}

	r := startReplica(t, "run 1", cfg)
	waitUntil(t, ctx, "half the rows in PostgreSQL before the kill", func() bool { return count(dbAz) >= n/2 && count(dbKafka) >= n/2 }, r)
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-r.done

	checkpointed := avroCheckpointed(t, ctx, av, ckptDir)
	// n/2 records and one poison event per partition
	last := func(hub, cg string) bool { return checkpointed(hub, cg, n/2) }
	r = startReplica(t, "run 2", cfg)
	waitUntil(t, ctx, "every connector checkpoints the last event", func() bool {
		return last("avro-az", "$default") && last("avro-az", "pq") && last("avro-kafka", "$default") && last("avro-kafka", "pq")
	}, r)
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-r.done

	want := func(readerV2 bool) []string {
		var w []string
		for i := range n {
			w = append(w, avroWant(i, readerV2))
		}
		slices.Sort(w)
		return w
	}
	for _, c := range []struct {
		name     string
		db       *pgx.Conn
		readerV2 bool
		reasons  []string
	}{
		{"avro-az-pg", dbAz, true, []string{"unknown schema id", "invalid Avro body"}},
		{"avro-kafka-pg", dbKafka, false, []string{"unknown schema id", "no Confluent framing"}},
	} {
		rows, err := c.db.Query(ctx, avroRowSQL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if w := want(c.readerV2); !slices.Equal(got, w) {
			t.Errorf("%s: PostgreSQL holds %d rows, want %d exactly once as sent; first difference: %s", c.name, len(got), len(w), firstDiff(got, w))
		}
		rows, err = c.db.Query(ctx, `SELECT reason FROM ehsink_dead_letters ORDER BY reason`)
		if err != nil {
			t.Fatal(err)
		}
		reasons, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(reasons) != len(c.reasons) {
			t.Errorf("%s: dead letters %q, want %d", c.name, reasons, len(c.reasons))
		}
		for _, w := range c.reasons {
			if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, w) }) {
				t.Errorf("%s: no dead letter says %q: %q", c.name, w, reasons)
			}
		}
	}
	for name, dir := range map[string]string{"avro-az-pq": pqAz, "avro-kafka-pq": pqKafka} {
		var got []string
		walkFiles(t, dir, ".parquet", func(path string, _ []byte) {
			tb, err := parquettest.ReadFile(path)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, row := range tb.Rows {
				got = append(got, parquetAvroRow(row))
			}
		})
		slices.Sort(got)
		if w := want(false); !slices.Equal(got, w) {
			t.Errorf("%s: Parquet holds %d rows, want %d exactly once as sent; first difference: %s", name, len(got), len(w), firstDiff(got, w))
		}
		if dead := readLogDead(t, dir); len(dead) != 2 {
			t.Errorf("%s: dead letters %v, want the 2 poison events", name, dead)
		}
	}
}

// The emulator's registry credentials, given to the producers and the
// connectors.
const avroKey, avroUser, avroPassword = "cm9vdC1rZXk=", "kafka", "c29tZS1wYXNzd29yZA"

// avroEnv is an emulator serving both schema registries, with two hubs of
// two partitions, and the node producer of testdata/avro_produce.js.
type avroEnv struct {
	srv                         *emulator.Server
	node, modules, ca, registry string
	azureHub, kafkaHub          string
}

// startAvroEnv starts the emulator with hubs azureHub and kafkaHub, each
// with the consumer group cg beside $Default; it skips t when node or the
// producer's packages are missing (fails it when CI=true).
func startAvroEnv(t *testing.T, azureHub, kafkaHub, cg string) *avroEnv {
	t.Helper()
	av := &avroEnv{azureHub: azureHub, kafkaHub: kafkaHub}
	av.node, av.modules = avroNode(t)
	av.srv = emulatortest.Start(t, emulator.Config{
		Hubs: []emulator.HubConfig{
			{Name: azureHub, Partitions: 2, ConsumerGroups: []string{cg}},
			{Name: kafkaHub, Partitions: 2, ConsumerGroups: []string{cg}},
		},
		Keys:                    map[string]secret.String{"root": avroKey},
		SchemaRegistryAddr:      "127.0.0.1:0",
		SchemaRegistryBasicAuth: secret.String(avroUser + ":" + avroPassword),
	})
	av.ca = filepath.Join(t.TempDir(), "emulator-ca.pem")
	if err := os.WriteFile(av.ca, av.srv.CertificatePEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	av.registry = "https://" + av.srv.SchemaRegistryAddr()
	t.Setenv("AVRO_TEST_REGISTRY_PASSWORD", avroPassword)
	return av
}

// source is a connector's source block reading hub (in consumer group cg
// unless it is empty) through registry, in small batches, with leases
// that expire in 3 s.
func (av *avroEnv) source(hub, cg, registry string) string {
	if cg != "" {
		cg = "consumer_group: " + cg + ", "
	}
	return `{connection: "` + av.srv.ConnectionString(hub) + `", ` + cg + `format: avro, registry: ` + registry +
		`, batch: {max_events: 15, max_wait: 100ms}, load_balancing: {strategy: greedy, update_interval: 1s, ownership_expiration: 3s}}`
}

// azureRegistry and confluentRegistry are the registry blocks of the
// emulator's two registries, with the keys more (", key: value").
func (av *avroEnv) azureRegistry(more string) string {
	return `{type: azure, group: shop, url: "` + av.registry + `", ca_file: ` + av.ca + more + `}`
}

func (av *avroEnv) confluentRegistry(more string) string {
	return `{type: confluent, url: "` + av.registry + `", ca_file: ` + av.ca + `, username: ` + avroUser +
		`, password: ${AVRO_TEST_REGISTRY_PASSWORD}` + more + `}`
}

// produce runs testdata/avro_produce.js with n events and the extra
// environment variables env.
func (av *avroEnv) produce(t *testing.T, ctx context.Context, n int, env ...string) {
	t.Helper()
	nsConn, _, _ := strings.Cut(av.srv.ConnectionString(av.azureHub), ";EntityPath=")
	cmd := exec.CommandContext(ctx, av.node, filepath.Join("testdata", "avro_produce.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+av.modules, "NODE_EXTRA_CA_CERTS="+av.ca,
		"EH_CONNECTION_STRING="+nsConn+";UseDevelopmentEmulator=true", "SR_ENDPOINT="+av.registry,
		"SR_KEY_NAME=root", "SR_KEY="+avroKey, "CONFLUENT_USER="+avroUser, "CONFLUENT_PASSWORD="+avroPassword,
		"AZURE_HUB="+av.azureHub, "KAFKA_HUB="+av.kafkaHub, fmt.Sprintf("AVRO_EVENTS=%d", n))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node testdata/avro_produce.js: %v\n%s", err, out)
	}
	t.Logf("producer: %s", out)
}

// avroRowSQL reads public.orders as avroWant renders its rows.
const avroRowSQL = `SELECT id || '|' || name || '|' || amount::text || '|' || (extract(epoch from placed) * 1000)::bigint || '|' ||
	to_char(day AT TIME ZONE 'UTC', 'YYYY-MM-DD') || '|' || ref::text || '|' || coalesce(note, '<null>') || '|' || coalesce(channel, '<null>') FROM public.orders`

func connect(t *testing.T, ctx context.Context, dsn string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close(context.Background()) })
	return db
}

// parquetAvroRow renders a Parquet row as avroWant does.
func parquetAvroRow(row map[string]any) string {
	text := func(v any) string {
		if v == nil {
			return "<null>"
		}
		return fmt.Sprint(v)
	}
	amount := "<null>"
	if s, ok := row["amount"].(string); ok { // UNSCALEDe-2
		if unscaled, ok := strings.CutSuffix(s, "e-2"); ok {
			sign := ""
			if strings.HasPrefix(unscaled, "-") {
				sign, unscaled = "-", unscaled[1:]
			}
			unscaled = fmt.Sprintf("%03s", unscaled)
			amount = sign + strings.TrimLeft(unscaled[:len(unscaled)-2], "0")
			if strings.TrimLeft(unscaled[:len(unscaled)-2], "0") == "" {
				amount = sign + "0"
			}
			amount += "." + unscaled[len(unscaled)-2:]
		}
	}
	placed, _ := row["placed"].(time.Time)
	day, _ := row["day"].(time.Time)
	return fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s|%s", text(row["id"]), text(row["name"]), amount, placed.UnixMilli(), day.Format(time.DateOnly),
		text(row["ref"]), text(row["note"]), text(row["channel"]))
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got %q, want %q", got[i], want[i])
		}
	}
	return fmt.Sprintf("%d rows against %d", len(got), len(want))
}
