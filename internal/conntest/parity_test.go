package conntest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/parquettest"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/table"
)

// parityCase is a connector (its sink block, and a filter) and events to
// run through it, both as `ehsink test` runs them and through the real
// sink.
type parityCase struct {
	name   string
	filter string // the filter: block's body, or ""
	// sink is the sink block's body; $DSN is a fresh database's DSN,
	// $DIR a fresh directory, $CATALOG a SQLite file outside it.
	sink   string
	upsert bool     // rows replace the rows of their key; deletes remove them
	bodies []string // event bodies, sequence numbers 0, 1, ...
	keys   []string // partition keys by event ("" for none)
}

// parityCases are the routing features of docs/configuration.md:
// routing by condition, templated tables and paths, explode with routes,
// deletes and Debezium on routed tables, filters, and what each makes a
// dead letter.
var parityCases = []parityCase{
	{
		name: "pg/routes by condition, a templated default",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: created, when: "$.type == 'order_created'", table: orders, columns: {seq: "@sequence_number", order_id: $.order_id, amount: {from: $.amount, type: bigint}}}
  - {name: cancelled, when: "$.type == 'order_cancelled'", table: order_cancellations, columns: {seq: "@sequence_number", order_id: $.order_id, reason: $.reason}}
  - {table: "other_{$.type}", columns: {seq: "@sequence_number", order_id: $.order_id}}`,
		bodies: []string{
			`{"type":"order_created","order_id":"o1","amount":5,"total":12.5}`,
			`{"type":"order_cancelled","order_id":"o1","reason":"late"}`,
			`{"type":"refund","order_id":"o2"}`,
			`{"type":"order_created","order_id":"o2","amount":5,"total":123456789}`,
			`{"type":"refund","order_id":"o3"}`,
			`{"type":"note","order_id":"o4"}`,
			`{"order_id":"o5"}`,
			`{"type":"x; drop table orders","order_id":"o6"}`,
			`{"type":"order_created","order_id":"o7","amount":"lots"}`,
			`not json`,
		},
	},
	{
		name: "pg/a templated table that renders a literal route's table",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: lit, when: "$.k == 'first'", table: t_lit, columns: {seq: "@sequence_number", k: $.k}}
  - {name: tmpl, table: "t_{$.k}", columns: {seq: "@sequence_number", k: $.k, n: {from: $.n, type: bigint}}}`,
		bodies: []string{`{"k":"first"}`, `{"k":"lit","n":1}`, `{"k":"b","n":2}`},
	},
	{
		name: "pg/two templated routes that render one table",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: a, when: "$.side == 'a'", table: "pair_{$.k}", columns: {seq: "@sequence_number", k: $.k}}
  - {name: b, table: "pair_{$.k}_b", columns: {seq: "@sequence_number", k: $.k, n: {from: $.n, type: bigint}}}`,
		bodies: []string{`{"side":"a","k":"x"}`, `{"side":"b","k":"x","n":1}`, `{"side":"a","k":"x_b"}`},
	},
	{
		name: "pg/past max_tables",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {table: "mt_{$.type}", max_tables: 2, columns: {seq: "@sequence_number", type: $.type}}`,
		bodies: []string{`{"type":"a"}`, `{"type":"b"}`, `{"type":"c"}`, `{"type":"a"}`},
	},
	{
		name: "pg/templated table by partition",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: beats, when: "$.kind == 'heartbeat'", table: "heartbeats_{@partition}", columns: {seq: "@sequence_number"}}
  - {table: main, columns: {seq: "@sequence_number", v: $.v}}`,
		bodies: []string{`{"kind":"heartbeat"}`, `{"v":"x"}`},
	},
	{
		name: "pg/explode on one route",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: batches, when: "exists($.items)", table: items, explode: $.items, columns: {seq: "@sequence_number", idx: "@index", sku: $.sku, qty: {from: $.qty, type: bigint}}}
  - {name: single, table: singles, columns: {seq: "@sequence_number", sku: $.sku}}`,
		bodies: []string{
			`{"items":[{"sku":"a","qty":1},{"sku":"b","qty":"two"},{"sku":"c","qty":3}]}`,
			`{"sku":"z"}`,
			`{"items":[]}`,
			`{"items":"nope"}`,
		},
	},
	{
		name: "pg/explode on a templated route",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {table: "ex_{$.type}", explode: $.items, columns: {seq: "@sequence_number", idx: "@index", v: $.v}}`,
		bodies: []string{`{"type":"a","items":[{"v":"1"},{"v":"2"}]}`, `{"type":"b","items":[{"v":"3"}]}`, `{"items":[{"v":"4"}]}`},
	},
	{
		name:   "pg/deletes on routed tables, one key each",
		upsert: true,
		sink: `type: postgres
dsn: $DSN
mode: upsert
create_table: true
delete: {when: "$.op == 'd'", key: {order_id: "@partition_key"}}
routes:
  - {name: orders, when: "$.kind == 'order'", table: orders, key: [order_id], columns: {order_id: $.id, status: $.status}}
  - {name: customers, table: customers, key: [customer_id], columns: {customer_id: $.id, name: $.name}}`,
		bodies: []string{
			`{"kind":"order","id":"o1","status":"new"}`,
			`{"kind":"order","id":"o2","status":"new"}`,
			`{"kind":"order","op":"d"}`,
			`{"kind":"customer","id":"c1","name":"Ann"}`,
			`{"kind":"customer","id":"c2","name":"Bob"}`,
			`{"kind":"customer","id":"c2","op":"d"}`,
		},
		keys: []string{"o1", "o2", "o1", "c1", "c2", "c2"},
	},
	{
		name:   "pg/deletes on a templated route",
		upsert: true,
		sink: `type: postgres
dsn: $DSN
mode: upsert
create_table: true
delete: {when: "$.op == 'd'"}
routes:
  - {table: "kv_{$.ns}", key: [id], columns: {id: $.id, v: $.v}}`,
		bodies: []string{`{"ns":"a","id":"1","v":"x"}`, `{"ns":"a","id":"2","v":"y"}`, `{"ns":"a","id":"1","op":"d"}`, `{"ns":"b","id":"1","v":"z"}`, `{"id":"9","op":"d"}`},
	},
	{
		name:   "pg/debezium routed by source table",
		upsert: true,
		sink: `type: postgres
dsn: $DSN
mode: upsert
create_table: true
format: debezium
routes:
  - {name: users, when: "$.source.table == 'users'", table: users, key: [id], columns: {id: {from: $.id, type: bigint}, email: $.email}}
  - {table: "cdc_{$.source.table}", key: [id], columns: {id: {from: $.id, type: bigint}, v: $.v}}`,
		bodies: []string{
			`{"op":"c","after":{"id":1,"email":"a@x"},"source":{"table":"users"}}`,
			`{"op":"c","after":{"id":2,"email":"b@x"},"source":{"table":"users"}}`,
			`{"op":"d","before":{"id":1},"source":{"table":"users"}}`,
			``,
			`{"op":"r","after":{"id":7,"v":"s"},"source":{"table":"items"}}`,
			`{"op":"u","after":{"id":7,"v":"t"},"source":{"table":"items"}}`,
			`{"op":"t","source":{"table":"items"}}`,
		},
	},
	{
		name: "pg/what PostgreSQL cannot store, on an exploding route",
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: many, when: "exists($.items)", table: many, explode: $.items, columns: {seq: "@sequence_number", idx: "@index", s: $.s}}
  - {table: one, columns: {seq: "@sequence_number", s: $.s, doc: {from: $.doc, type: json}}}`,
		bodies: []string{
			`{"items":[{"s":"a"},{"s":"b\u0000c"},{"s":"d"}]}`,
			`{"s":"x\u0000y"}`,
			`{"s":"ok","doc":{"k":"\u0000"}}`,
			`{"s":"ok","doc":{"k":"v"}}`,
		},
	},
	{
		name:   "pg/a filter before routes",
		filter: `drop: "$.type == 'noise'"`,
		sink: `type: postgres
dsn: $DSN
create_table: true
routes:
  - {name: a, when: "$.type == 'a'", table: fa, columns: {seq: "@sequence_number"}}
  - {name: b, when: "$.type == 'b'", table: fb, columns: {seq: "@sequence_number"}}`,
		bodies: []string{`{"type":"a"}`, `{"type":"noise"}`, `{"type":"b"}`, `{"type":"c"}`, `oops`},
	},
	{
		name: "parquet/templated paths and a default route",
		sink: `type: parquet
dir: $DIR
routes:
  - {name: typed, when: "exists($.type)", path: "type={$.type}/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}, type: $.type}}
  - {name: rest, path: "rest/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}, v: $.v}}`,
		bodies: []string{`{"type":"a"}`, `{"type":"b"}`, `{"v":"x"}`, `{"type":"../up"}`, `{"type":""}`, `{"type":7}`, `{"type":null}`, `nope`},
	},
	{
		name: "parquet/explode with routes",
		sink: `type: parquet
dir: $DIR
explode: $.records
routes:
  - {name: audit, when: "$.category == 'audit'", path: "audit/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}, idx: {from: "@index", type: int64}, op: $.op}}
  - {name: other, path: "cat={$.category}/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}, idx: {from: "@index", type: int64}, n: {from: $.n, type: int64}}}`,
		bodies: []string{
			`{"category":"audit","records":[{"op":"read"},{"op":"write"}]}`,
			`{"category":"metrics","records":[{"n":1},{"n":"x"},{"n":3}]}`,
			`{"records":[{"category":"audit","op":"inner"}]}`,
			`{"category":"metrics","records":[]}`,
		},
	},
	{
		name:   "parquet/a filter before routes",
		filter: `keep: "$.level != 'debug'"`,
		sink: `type: parquet
dir: $DIR
routes:
  - {name: errors, when: "$.level == 'error'", path: "errors/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}}}
  - {name: lvl, path: "level={$.level}/{partition}-{first_seq}-{last_seq}.parquet", columns: {seq: {from: "@sequence_number", type: int64}, level: $.level}}`,
		bodies: []string{`{"level":"error"}`, `{"level":"debug"}`, `{"level":"info"}`, `{"msg":"no level"}`},
	},
	{
		name: "iceberg/routes by condition, values a column cannot store",
		sink: `type: iceberg
catalog: {type: sql, driver: sqlite, uri: $CATALOG}
warehouse: {dir: $DIR}
namespace: lake
routes:
  - {name: created, when: "$.type == 'order_created'", table: orders, columns: {seq: "@sequence_number", order_id: $.order_id, amount: {from: $.amount, type: int32}, total: {from: $.total, type: "decimal(6,2)"}}}
  - {name: cancelled, when: "$.type == 'order_cancelled'", table: cancellations, columns: {seq: "@sequence_number", order_id: $.order_id, reason: {from: $.reason, nullable: false}}}`,
		bodies: []string{
			`{"type":"order_created","order_id":"o1","amount":5,"total":12.5}`,
			`{"type":"order_cancelled","order_id":"o1","reason":"late"}`,
			`{"type":"refund","order_id":"o2"}`,
			`{"type":"order_created","order_id":"o2","amount":5,"total":123456789}`,
			`{"type":"order_created","order_id":"o3","amount":3000000000}`,
			`{"type":"order_cancelled","order_id":"o4"}`,
			`{"type":"order_created","order_id":"o5","amount":"lots"}`,
			`not json`,
		},
	},
	{
		name: "iceberg/templated tables, max_tables and names that are no table",
		sink: `type: iceberg
catalog: {type: sql, driver: sqlite, uri: $CATALOG}
warehouse: {dir: $DIR}
namespace: lake
routes:
  - {name: typed, when: "exists($.type)", table: "ev_{$.type}", max_tables: 2, columns: {seq: {from: "@sequence_number", type: int64}, type: $.type}}
  - {name: rest, table: rest, columns: {seq: {from: "@sequence_number", type: int64}, v: $.v}}`,
		bodies: []string{`{"type":"a"}`, `{"type":"b"}`, `{"type":"a"}`, `{"type":"c"}`, `{"type":"../up"}`, `{"type":7}`, `{"v":"x"}`, `nope`},
	},
	{
		name: "iceberg/explode with routes",
		sink: `type: iceberg
catalog: {type: sql, driver: sqlite, uri: $CATALOG}
warehouse: {dir: $DIR}
namespace: lake
routes:
  - {name: audit, when: "$.category == 'audit'", table: audit, explode: $.records, columns: {seq: {from: "@sequence_number", type: int64}, idx: {from: "@index", type: int64}, op: $.op}}
  - {name: other, table: other, columns: {seq: {from: "@sequence_number", type: int64}, category: $.category}}`,
		bodies: []string{
			`{"category":"audit","records":[{"op":"read"},{"op":"write"}]}`,
			`{"category":"metrics","records":[{"n":1}]}`,
			`{"category":"audit","records":[]}`,
			`{"category":"audit","records":[{"op":"read"},{"op":7}]}`,
		},
	},
}

// TestParityWithTheSinks runs each case through `ehsink test`'s path (the
// target newTarget builds from the connector) and through the real sink
// (PostgreSQL from internal/testenv; Parquet files read back with
// arrow-go), and compares what each made of every event: its dead letter
// and reason, and the rows of every table (or every file) after the
// flush, row by row.
func TestParityWithTheSinks(t *testing.T) {
	pg := testenv.Postgres(t)
	for _, c := range parityCases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out, dsn := filepath.Join(dir, "out"), ""
			sink := strings.ReplaceAll(c.sink, "$DIR", "'"+out+"'")
			sink = strings.ReplaceAll(sink, "$CATALOG", "'"+filepath.Join(dir, "catalog.db")+"'")
			if strings.Contains(sink, "$DSN") {
				dsn = pg.NewDatabase(t)
				sink = strings.ReplaceAll(sink, "$DSN", `"`+dsn+`"`)
			}
			text := "emulator: {hubs: {events: 1}}\nconnectors:\n  - name: c\n    source: {connection: emulator, eventhub: events}\n" +
				"    checkpoint: {file: {dir: '" + filepath.Join(dir, "ckpt") + "'}}\n"
			if c.filter != "" {
				text += "    filter: {" + c.filter + "}\n"
			}
			text += "    sink:\n      " + strings.ReplaceAll(sink, "\n", "\n      ") + "\n"
			path := filepath.Join(dir, "connectors.yaml")
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := &loadConfig(t, path).Connectors[0]
			events := make([]sinks.Event, len(c.bodies))
			for i, b := range c.bodies {
				events[i] = sinks.Event{Partition: "0", SequenceNumber: int64(i), Offset: fmt.Sprint(i), EnqueuedTime: DefaultEnqueuedTime, Body: []byte(b)}
				if i < len(c.keys) && c.keys[i] != "" {
					events[i].PartitionKey = &c.keys[i]
				}
			}
			preview := previewRun(t, spec, c.upsert, events)
			real := realRun(t, spec, events, dsn, out)
			compareRuns(t, preview, real)
		})
	}
}

// runResult is what a run made of a case's events.
type runResult struct {
	failed   string              // the sink refused to start, or ehsink test to prepare
	letters  map[int]string      // dead letters by event index: their reasons
	filtered []int               // events the filter dropped
	rows     map[string][]string // rows by table ("" for a Parquet sink), each as text, sorted
}

// previewRun is `ehsink test`'s path: each event through the target it
// builds from the connector, the rows kept as a table would keep them.
func previewRun(t *testing.T, spec *connector.Spec, upsert bool, events []sinks.Event) runResult {
	t.Helper()
	res := runResult{letters: map[int]string{}, rows: map[string][]string{}}
	tg, err := newTarget(spec)
	if err != nil {
		res.failed = err.Error()
		return res
	}
	shape, _ := spec.Sink.Config.(table.Shaper).TableShape()
	pc := preparedCase{filter: spec.Filter, format: connector.ChangeEvents(spec.Sink.Config), target: tg}
	// Per table, rows by identity: their key (upserts) or their place.
	type kept struct {
		id, text string
	}
	tables := map[string][]kept{}
	for i := range events {
		out := pc.apply(context.Background(), &events[i])
		switch {
		case out.filtered:
			res.filtered = append(res.filtered, i)
			continue
		case out.reason != "":
			res.letters[i] = out.reason
			continue
		case out.op == cdc.OpSkip && !out.exploded:
			continue
		}
		r := shape.Routes[0]
		if shape.Routed {
			r = shape.Routes[slices.IndexFunc(shape.Routes, func(r table.Route) bool { return r.Name == out.route })]
		}
		name := out.table
		if name == "" && r.DestIsTable {
			name = r.Dest
		}
		if !r.DestIsTable {
			name = ""
		}
		name = strings.TrimPrefix(name, "public.")
		outs := []outcome{out}
		if out.exploded {
			outs = out.elems
		}
		for j, o := range outs {
			if o.reason != "" {
				// An element's dead letter: the event's reason, as
				// the sink reports it (the first element's).
				if _, dup := res.letters[i]; !dup {
					res.letters[i] = o.reason
				}
				continue
			}
			if o.op == cdc.OpSkip {
				continue
			}
			cols := map[string]value{}
			for k, n := range o.cols {
				cols[n] = o.row[k]
			}
			id := fmt.Sprintf("%d/%d", i, j)
			if upsert {
				var key []string
				for _, k := range r.Key {
					key = append(key, cols[k].key)
				}
				id = strings.Join(key, "|")
				tables[name] = slices.DeleteFunc(tables[name], func(k kept) bool { return k.id == id })
				if o.op == cdc.OpDelete {
					continue
				}
			}
			tables[name] = append(tables[name], kept{id: id, text: rowText(cols)})
		}
	}
	for name, ks := range tables {
		for _, k := range ks {
			res.rows[name] = append(res.rows[name], k.text)
		}
		slices.Sort(res.rows[name])
	}
	return res
}

// realRun is the running sink's path: the filter as the runner applies
// it, then one Write and one Flush of the sink's writer; then every table
// (every file) is read back: the tables of the database at dsn, or the
// files under dir.
func realRun(t *testing.T, spec *connector.Spec, events []sinks.Event, dsn, dir string) runResult {
	t.Helper()
	ctx := t.Context()
	res := runResult{letters: map[int]string{}, rows: map[string][]string{}}
	d, err := (*sinks.Registry)(nil).Lookup(spec.Sink.Type)
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.New(ctx, spec.Sink.Config, sinks.Info{Connector: spec.Name, EventHub: "events", ConsumerGroup: "$Default"})
	if err != nil {
		res.failed = err.Error()
		return res
	}
	defer s.Close(context.WithoutCancel(ctx))
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer w.Close(context.WithoutCancel(ctx))
	var kept []sinks.Event
	var index []int
	format := connector.ChangeEvents(spec.Sink.Config)
	for i := range events {
		keep, err := spec.Filter.Keeps(&events[i], format)
		switch {
		case err != nil:
			res.letters[i] = err.Error()
		case !keep:
			res.filtered = append(res.filtered, i)
		default:
			kept = append(kept, events[i])
			index = append(index, i)
		}
	}
	if err := w.Write(ctx, kept); err != nil {
		var be *sinks.BatchError
		if !errors.As(err, &be) {
			t.Fatalf("write: %v", err)
		}
		for _, f := range be.Failed {
			if _, dup := res.letters[index[f.Index]]; !dup {
				res.letters[index[f.Index]] = f.Err.Error()
			}
		}
	}
	if _, err := w.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	shape, _ := spec.Sink.Config.(table.Shaper).TableShape()
	col := func(name string) mapping.Column {
		for _, r := range shape.Routes {
			if i := r.Columns.Index(name); i >= 0 {
				return r.Columns[i]
			}
		}
		return mapping.Column{Name: name, Type: mapping.Type{Kind: mapping.KindString}}
	}
	row := func(vals map[string]any) string {
		cols := map[string]value{}
		for n, v := range vals {
			if strings.HasPrefix(n, "_ehsink") {
				continue
			}
			wv, err := wantValue(col(n), v)
			if err != nil {
				t.Fatalf("column %s: %v", n, err)
			}
			cols[n] = wv
		}
		return rowText(cols)
	}
	if spec.Sink.Type == "postgres" {
		for name, rows := range readTables(t, dsn) {
			for _, r := range rows {
				res.rows[name] = append(res.rows[name], row(r))
			}
			slices.Sort(res.rows[name])
		}
		return res
	}
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".parquet") || strings.Contains(p, "dead") {
			return err
		}
		tb, err := parquettest.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		name := ""
		if spec.Sink.Type == "iceberg" {
			// An Iceberg data file: WAREHOUSE/NAMESPACE.db/TABLE/data/FILE
			// (after one committed Flush, every file is the table's).
			tdir := filepath.Dir(filepath.Dir(p))
			name = strings.TrimSuffix(filepath.Base(filepath.Dir(tdir)), ".db") + "." + filepath.Base(tdir)
		}
		for _, r := range tb.Rows {
			res.rows[name] = append(res.rows[name], row(r))
		}
		return nil
	})
	for _, rows := range res.rows {
		slices.Sort(rows)
	}
	return res
}

// readTables reads every table of the public schema but the sink's state
// tables, each row as column → text.
func readTables(t *testing.T, dsn string) map[string][]map[string]any {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'ehsink\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, name := range names {
		rows, err := conn.Query(ctx, `SELECT column_name FROM information_schema.columns WHERE table_schema = 'public' AND table_name = $1`, name)
		if err != nil {
			t.Fatal(err)
		}
		cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		sel := make([]string, len(cols))
		for i, c := range cols {
			sel[i] = pgx.Identifier{c}.Sanitize() + "::text"
		}
		rows, err = conn.Query(ctx, `SELECT `+strings.Join(sel, ", ")+` FROM `+pgx.Identifier{name}.Sanitize())
		if err != nil {
			t.Fatal(err)
		}
		out[name] = []map[string]any{}
		for rows.Next() {
			vals := make([]*string, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			r := map[string]any{}
			for i, c := range cols {
				if vals[i] != nil {
					r[c] = *vals[i]
				} else {
					r[c] = nil
				}
			}
			out[name] = append(out[name], r)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// rowText is a row as comparable text: its columns in name order.
func rowText(cols map[string]value) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(cols)) {
		parts = append(parts, n+"="+cols[n].show)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// compareRuns reports every difference between ehsink test's run and the
// sink's.
func compareRuns(t *testing.T, preview, real runResult) {
	t.Helper()
	if preview.failed != "" || real.failed != "" {
		if (preview.failed == "") != (real.failed == "") {
			t.Errorf("ehsink test: %q; the sink: %q (one refuses the connector, the other takes it)", preview.failed, real.failed)
		}
		return
	}
	if !slices.Equal(preview.filtered, real.filtered) {
		t.Errorf("filtered: ehsink test %v, the runner %v", preview.filtered, real.filtered)
	}
	for i := range max(len(preview.letters), len(real.letters)) + 64 {
		p, pok := preview.letters[i]
		r, rok := real.letters[i]
		switch {
		case pok && !rok:
			t.Errorf("event %d: ehsink test dead-letters it (%s), the sink does not", i, p)
		case rok && !pok:
			t.Errorf("event %d: the sink dead-letters it (%s), ehsink test does not", i, r)
		case pok && p != r:
			t.Errorf("event %d: dead-letter reasons differ:\n  ehsink test: %s\n  the sink:    %s", i, p, r)
		}
	}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range []map[string][]string{preview.rows, real.rows} {
			for k := range m {
				if !seen[k] && !yield(k) {
					return
				}
				seen[k] = true
			}
		}
	}) {
		p, r := preview.rows[name], real.rows[name]
		if !slices.Equal(p, r) {
			t.Errorf("table %q:\n  ehsink test: %s\n  the sink:    %s", name, strings.Join(p, " "), strings.Join(r, " "))
		}
	}
}
