package e2e_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the Iceberg sink's SQL catalog, read by the test

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/testenv"
)

// avroEvolveWant is record i of avro_produce.js with AVRO_EVOLVE, n
// records per version, as a row of columns: auto holds it: read with its
// own writer schema, so a v1 row has no channel (no reader schema lends
// it the default) and a v3 row no note.
func avroEvolveWant(i, n int) string {
	version := i/n + 1
	note, channel := "<null>", "<null>"
	if version < 3 && i%3 != 0 {
		note = fmt.Sprintf("note %d", i)
	}
	if version > 1 {
		channel = "store"
		if i%2 == 1 {
			channel = "app"
		}
	}
	return avroCommon(i) + "|" + note + "|" + channel
}

// TestAvroSchemaEvolution: the JavaScript producers (Azure's Avro
// serializer; kafkajs' Confluent client, which encodes with avsc) send v1
// (with an optional note), then v2 (channel added with a default), then
// v3 (note removed) into PostgreSQL, Iceberg and Parquet sinks with
// columns: auto, run by two `ehsink run` replicas. The first replica to
// build a connector's sink with the grown columns is killed (-9, by the
// binary's test hook, connector.KillAfterGrowthEnv) between the sink's
// evolve (ALTER TABLE, the Iceberg schema update, the Parquet schema of
// the files to come) and the first row that uses it, once per connector,
// and is started again. In the end every
// record is one row with the values sent, read back by PostgreSQL,
// iceberg-go's scan and hyparquet; the tables gained channel and kept
// note, null in v1 and v3 rows respectively.
func TestAvroSchemaEvolution(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	av := startAvroEnv(t, "evolve-az", "evolve-kafka", "ice")
	const n = 40 // records per version and hub, every other one in each partition
	av.produce(t, ctx, n, "AVRO_EVOLVE=1")

	work := t.TempDir()
	dsn := testenv.NewPostgres(t).NewDatabase(t)
	ckptDir, pqDir, catalogDB := filepath.Join(work, "checkpoints"), filepath.Join(work, "pq"), filepath.Join(work, "catalog.db")
	markers := filepath.Join(work, "kills")
	if err := os.Mkdir(markers, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(connector.KillAfterGrowthEnv, markers)
	azure := av.azureRegistry(", subject: shop.Order")
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: az-pg
    source: `+av.source("evolve-az", "", azure)+`
    checkpoint: {file: {dir: `+ckptDir+`}, every_events: 1}
    sink: {type: postgres, dsn: "`+dsn+`", table: public.orders, create_table: true, columns: auto}
  - name: az-iceberg
    source: `+av.source("evolve-az", "ice", azure)+`
    checkpoint: {file: {dir: `+ckptDir+`}, every_events: 1}
    sink: {type: iceberg, catalog: {type: sql, driver: sqlite, uri: `+catalogDB+`}, warehouse: {dir: `+filepath.Join(work, "warehouse")+`},
      namespace: lake, table: orders, max_rows: 20, max_age: 200ms, columns: auto}
  - name: kafka-pq
    source: `+av.source("evolve-kafka", "", av.confluentRegistry(", subject: orders-value"))+`
    checkpoint: {file: {dir: `+ckptDir+`}, every_events: 1}
    sink: {type: parquet, dir: `+pqDir+`, max_rows: 20, max_age: 200ms, columns: auto}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	checkpointed := avroCheckpointed(t, ctx, av, ckptDir)
	// all reports whether every connector checkpointed records up to i
	// (each partition holds every other record).
	all := func(i int64) bool {
		return checkpointed("evolve-az", "$default", i/2) && checkpointed("evolve-az", "ice", i/2) && checkpointed("evolve-kafka", "$default", i/2)
	}
	replicas := []*replica{startReplica(t, "replica 1", cfg), startReplica(t, "replica 2", cfg)}
	waitUntil(t, ctx, "v1 committed by every connector", func() bool { return all(n - 1) }, replicas...)
	db := connect(t, ctx, dsn)
	common := "partition,seq,enqueued_at,id,name,amount,placed,day,ref,tags"
	if got, want := pgColumns(t, ctx, db), common+",note"; got != want {
		t.Fatalf("PostgreSQL columns after v1: %s, want %s", got, want)
	}

	av.produce(t, ctx, n, "AVRO_EVOLVE=2")
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for restarts := 0; !all(3*n - 1); {
		for k, r := range replicas {
			select {
			case <-r.done:
				killedByHook(t, r, markers)
				restarts++
				replicas[k] = startReplica(t, fmt.Sprintf("replica %d, started again (%d)", k+1, restarts), cfg)
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("gave up waiting for every connector to checkpoint v3's last record")
		case <-tick.C:
		}
	}
	for _, r := range replicas {
		select {
		case <-r.done: // killed after the last checkpoint was written
			killedByHook(t, r, markers)
			continue
		default:
		}
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-r.done
	}
	killed, err := filepath.Glob(filepath.Join(markers, "*.killed"))
	if err != nil {
		t.Fatal(err)
	}
	if len(killed) != 3 {
		t.Errorf("%d kills after the columns grew (%v), want one per connector", len(killed), killed)
	}

	var want []string
	for i := range 3 * n {
		want = append(want, avroEvolveWant(i, n))
	}
	slices.Sort(want)
	check := func(sink string, got []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %d rows, want %d exactly once as sent; first difference: %s", sink, len(got), len(want), firstDiff(got, want))
		}
	}

	if got, want := pgColumns(t, ctx, db), common+",note,channel"; got != want {
		t.Errorf("PostgreSQL columns after v3: %s, want %s", got, want)
	}
	rows, err := db.Query(ctx, avroRowSQL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	check("PostgreSQL", got)

	fields, got := icebergScan(t, ctx, catalogDB)
	if want := common + ",note,channel"; fields != want {
		t.Errorf("Iceberg fields after v3: %s, want %s", fields, want)
	}
	check("Iceberg (iceberg-go's scan)", got)

	var paths []string
	walkFiles(t, pqDir, ".parquet", func(path string, _ []byte) { paths = append(paths, path) })
	got = nil
	for _, f := range parquettest.Hyparquet(t, paths...) {
		for _, row := range f.Rows {
			got = append(got, hyparquetAvroRow(t, row))
		}
		// A file holds one version's rows or, after the growth, several;
		// its columns are those of the newest schema plus every field an
		// earlier one had.
		newest := 0
		for _, row := range f.Rows {
			id, _ := strconv.Atoi(fmt.Sprint(row["id"]))
			newest = max(newest, (id-1)/n+1)
		}
		cols := strings.Join(f.Columns, ",")
		if want := common + ",note"; newest == 1 && cols != want {
			t.Errorf("%s: columns %s, want %s (v1 rows only)", f.File, cols, want)
		}
		if newest > 1 && (!slices.Contains(f.Columns, "channel") || !slices.Contains(f.Columns, "note")) {
			t.Errorf("%s: columns %s, want channel and note among them (rows up to v%d)", f.File, cols, newest)
		}
	}
	check("Parquet (hyparquet)", got)
}

// avroCheckpointed returns a function that reports whether the file
// checkpoint store under dir holds, for both partitions of hub in
// consumer group cg, checkpoints at sequence number seq.
func avroCheckpointed(t *testing.T, ctx context.Context, av *avroEnv, dir string) func(hub, cg string, seq int64) bool {
	t.Helper()
	props, err := azeventhubs.ParseConnectionString(av.srv.ConnectionString(av.azureHub))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := checkpoint.NewFileStore(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(fs, nil)
	return func(hub, cg string, seq int64) bool {
		cps, err := store.ListCheckpoints(ctx, props.FullyQualifiedNamespace, hub, cg, nil)
		if err != nil || len(cps) != 2 {
			return false
		}
		for _, cp := range cps {
			if cp.SequenceNumber == nil || *cp.SequenceNumber != seq {
				return false
			}
		}
		return true
	}
}

// killedByHook fails t unless r died of SIGKILL by the binary's test hook
// (connector.KillAfterGrowthEnv), which left its pid in markers.
func killedByHook(t *testing.T, r *replica, markers string) {
	t.Helper()
	if ws, ok := r.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%s exited (%v), not killed by the test hook", r.name, r.err)
	}
	pid := strconv.Itoa(r.cmd.Process.Pid) + "\n"
	killed, err := filepath.Glob(filepath.Join(markers, "*.killed"))
	if err != nil {
		t.Fatal(err)
	}
	// Two connectors of one process may reach the hook at once: both
	// name the pid.
	var by []string
	for _, k := range killed {
		if b, err := os.ReadFile(k); err == nil && string(b) == pid {
			by = append(by, strings.TrimSuffix(filepath.Base(k), ".killed"))
		}
	}
	if by != nil {
		t.Logf("%s killed after the columns of %s grew", r.name, strings.Join(by, " and "))
		return
	}
	t.Fatalf("%s was killed, but by no test hook (no marker holds its pid)", r.name)
}

// pgColumns lists the columns of public.orders in their order.
func pgColumns(t *testing.T, ctx context.Context, db *pgx.Conn) string {
	t.Helper()
	rows, err := db.Query(ctx, `SELECT column_name::text FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'orders' ORDER BY ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(cols, ",")
}

// icebergScan reads lake.orders with iceberg-go's own scan: its fields, in
// order, and its rows as avroCommon renders them, then note and channel.
func icebergScan(t *testing.T, ctx context.Context, catalogDB string) (string, []string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+catalogDB+"?_pragma=busy_timeout(30000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("ehsink", db, sqlcat.SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier("lake", "orders"))
	if err != nil {
		t.Fatal(err)
	}
	var fields []string
	for _, f := range tbl.Schema().Fields() {
		fields = append(fields, f.Name)
	}
	_, itr, err := tbl.Scan().ToArrowRecords(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var rows []string
	for rec, err := range itr {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		for i := range int(rec.NumRows()) {
			var vals []string
			for _, name := range []string{"id", "name", "amount", "placed", "day", "ref", "note", "channel"} {
				vals = append(vals, arrowText(t, rec, name, i))
			}
			rows = append(rows, strings.Join(vals, "|"))
		}
		rec.Release()
	}
	return strings.Join(fields, ","), rows
}

// arrowText renders row i of rec's column name as avroEvolveWant does.
func arrowText(t *testing.T, rec arrow.RecordBatch, name string, i int) string {
	t.Helper()
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		t.Fatalf("the scan has no column %s: %s", name, rec.Schema())
	}
	col := rec.Column(idx[0])
	if col.IsNull(i) {
		return "<null>"
	}
	switch a := col.(type) {
	case *array.Timestamp:
		ts := a.Value(i).ToTime(a.DataType().(*arrow.TimestampType).Unit).UTC()
		if name == "day" {
			return ts.Format(time.DateOnly)
		}
		return strconv.FormatInt(ts.UnixMilli(), 10)
	case *array.Decimal128:
		return a.Value(i).ToString(a.DataType().(*arrow.Decimal128Type).Scale)
	default:
		return col.ValueStr(i)
	}
}

// hyparquetAvroRow renders a row hyparquet read as avroEvolveWant does.
func hyparquetAvroRow(t *testing.T, row map[string]any) string {
	t.Helper()
	text := func(name string) string {
		if v, ok := row[name]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return "<null>"
	}
	at := func(name string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, text(name))
		if err != nil {
			t.Fatalf("hyparquet's %s: %v", name, err)
		}
		return ts
	}
	amount, _ := row["amount"].(float64)
	return fmt.Sprintf("%s|%s|%.2f|%d|%s|%s|%s|%s", text("id"), text("name"), amount, at("placed").UnixMilli(),
		at("day").Format(time.DateOnly), text("ref"), text("note"), text("channel"))
}
