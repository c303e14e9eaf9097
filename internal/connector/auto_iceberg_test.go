package connector_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"

	_ "github.com/ehsink/ehsink/sinks/iceberg"
)

// TestAutoColumnsIceberg: the three schema versions into an Iceberg table
// with columns: auto, read back by iceberg-go's own scan: the table's
// schema gains channel when the first v2 event comes (a new field id,
// optional) and keeps note after v3 drops it; every event is one row.
func TestAutoColumnsIceberg(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	catalogDB := filepath.Join(dir, "catalog.db")
	send, done := runAuto(t, ctx, dir, 1, false, `
      type: iceberg
      catalog: {type: sql, driver: sqlite, uri: `+catalogDB+`}
      warehouse: {dir: `+filepath.Join(dir, "warehouse")+`}
      namespace: lake
      table: orders
      max_rows: 2
      columns: auto`)
	// scan returns the table's field names and its rows by seq.
	scan := func() (string, map[int64]string) {
		db, err := sql.Open("sqlite", "file:"+catalogDB+"?_pragma=busy_timeout(30000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		cat, err := sqlcat.NewCatalog("ehsink", db, sqlcat.SQLite, nil)
		if err != nil {
			return "", nil // not created yet
		}
		tbl, err := cat.LoadTable(ctx, catalog.ToIdentifier("lake", "orders"))
		if err != nil || tbl.CurrentSnapshot() == nil {
			return "", nil
		}
		var names []string
		for _, f := range tbl.Schema().Fields() {
			names = append(names, f.Name)
		}
		selected := slices.DeleteFunc([]string{"seq", "id", "note", "channel"}, func(n string) bool { return !slices.Contains(names, n) })
		_, itr, err := tbl.Scan(table.WithSelectedFields(selected...)).ToArrowRecords(ctx)
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		rows := map[int64]string{}
		for rec, err := range itr {
			if err != nil {
				t.Fatalf("scan: %v", err)
			}
			col := func(name string) any {
				idx := rec.Schema().FieldIndices(name)
				if len(idx) == 0 {
					return nil
				}
				return rec.Column(idx[0])
			}
			seqs := col("seq").(*array.Int64)
			for i := range int(rec.NumRows()) {
				var vals []string
				for _, name := range []string{"id", "note", "channel"} {
					a, _ := col(name).(arrowValuer)
					v := "-"
					if a != nil && !a.IsNull(i) {
						v = a.ValueStr(i)
					}
					vals = append(vals, name+"="+v)
				}
				if _, dup := rows[seqs.Value(i)]; dup {
					t.Errorf("seq %d is in two rows", seqs.Value(i))
				}
				rows[seqs.Value(i)] = strings.Join(vals, " ")
			}
			rec.Release()
		}
		return strings.Join(names, ","), rows
	}
	const v1 = "partition,seq,enqueued_at,id,amount,placed,note"
	sendAutoVersions(t, ctx, send, done, func() int { _, r := scan(); return len(r) }, func(version int) {
		if fields, _ := scan(); version == 1 && fields != v1 {
			t.Fatalf("fields after v1: %s, want %s", fields, v1)
		}
	})
	fields, rows := scan()
	if want := v1 + ",channel"; fields != want {
		t.Errorf("fields after v3: %s, want %s", fields, want)
	}
	var got []string
	for seq := range int64(6) {
		got = append(got, fmt.Sprintf("%d: %s", seq, rows[seq]))
	}
	want := []string{"0: id=1 note=first channel=-", "1: id=2 note=- channel=-", "2: id=3 note=third channel=app",
		"3: id=4 note=- channel=web", "4: id=5 note=- channel=pos", "5: id=6 note=- channel=web"}
	if !slices.Equal(got, want) {
		t.Errorf("rows:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// arrowValuer is what the scan's columns are read through.
type arrowValuer interface {
	IsNull(i int) bool
	ValueStr(i int) string
}
