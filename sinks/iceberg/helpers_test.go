package iceberg

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// lake is a test's catalog and warehouse: a SQLite catalog file (or the
// PostgreSQL database at catalogDSN, or a REST catalog) and a local
// warehouse directory, fresh per test.
type lake struct {
	dir        string
	catalogDSN string
	rest       *restCatalog // the REST catalog the sink is given, if set
}

func newLake(t testing.TB) *lake {
	t.Helper()
	return &lake{dir: t.TempDir()}
}

func (l *lake) catalogPath() string   { return filepath.Join(l.dir, "catalog.db") }
func (l *lake) warehousePath() string { return filepath.Join(l.dir, "warehouse") }

// config is a sink config on the lake with the kit's columns.
func (l *lake) config(t testing.TB) *sinkConfig {
	t.Helper()
	c := newConfig()
	c.Catalog = catalogConfig{Type: "sql", Driver: "sqlite", URI: secret.String(l.catalogPath()), Name: "ehsink"}
	if l.catalogDSN != "" {
		c.Catalog.Driver, c.Catalog.URI = "postgres", secret.String(l.catalogDSN)
	}
	c.Namespace = "lake"
	c.Table = "orders"
	c.Warehouse.Dir = l.warehousePath()
	if l.rest != nil {
		// The REST catalog places the table in its own warehouse.
		c.Catalog = catalogConfig{Type: "rest", URI: secret.String(l.rest.url()), Credential: secret.String(l.rest.clientID + ":" + l.rest.secret)}
		c.Warehouse.Dir = ""
	}
	c.Columns = kitColumns(t)
	return c
}

var testInfo = sinks.Info{Connector: "orders-ice", EventHub: "orders", ConsumerGroup: "$Default"}

// newSink builds a sink on l; edit adjusts the config.
func (l *lake) newSink(t testing.TB, edit func(*sinkConfig)) *sink {
	t.Helper()
	c := l.config(t)
	if edit != nil {
		edit(c)
	}
	s, err := newIcebergSink(context.Background(), c, testInfo)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// writeTen opens partition 0 of s and writes seq 0..9 to it, unflushed.
func writeTen(t *testing.T, s *sink) sinks.Writer {
	t.Helper()
	ctx := context.Background()
	w, _, err := s.Open(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, sinktest.Events("0", 0, 9)); err != nil {
		t.Fatal(err)
	}
	return w
}

// kitColumns maps the sinktest kit's event body, plus metadata.
func kitColumns(t testing.TB) mapping.Columns {
	t.Helper()
	var cols mapping.Columns
	for _, c := range [][3]string{
		{"id", "$.id", "string"},
		{"partition", "@partition", "string"},
		{"seq", "@sequence_number", "int64"},
		{"customer", "$.customer", "string"},
		{"amount", "$.amount", "decimal(12,2)"},
		{"ts", "$.ts", "timestamp(ms)"},
		{"enqueued", "@enqueued_time", "timestamp"},
		{"key", "@partition_key", "string"},
		{"source", "@properties.source", "string"},
	} {
		col, err := mapping.NewColumn(c[0], c[1], c[2])
		if err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	return cols
}

// loadTable loads the lake's table through a catalog of its own.
func (l *lake) loadTable(t *testing.T) *table.Table { return l.loadNamed(t, "orders") }

// loadNamed loads the table name of the lake's namespace.
func (l *lake) loadNamed(t *testing.T, name string) *table.Table {
	t.Helper()
	s, err := newIcebergSink(context.Background(), l.config(t), testInfo)
	if err != nil {
		t.Fatalf("open the catalog: %v", err)
	}
	defer s.Close(context.Background())
	tbl, err := s.cat.LoadTable(context.Background(), table.Identifier{"lake", name})
	if err != nil {
		t.Fatalf("load table %s: %v", name, err)
	}
	return tbl
}

// scanSeqs reads the table back with iceberg-go's own scan and returns the
// sequence numbers of each partition, sorted (an Iceberg table has no row
// order across files; duplicates and gaps still show).
func (l *lake) scanSeqs(t *testing.T) map[string][]int64 { return l.scanNamed(t, "orders") }

// scanNamed is scanSeqs of the table name.
func (l *lake) scanNamed(t *testing.T, name string) map[string][]int64 {
	t.Helper()
	tbl := l.loadNamed(t, name)
	out := map[string][]int64{}
	if tbl.CurrentSnapshot() == nil {
		return out
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields("partition", "seq")).ToArrowRecords(context.Background())
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	for rec, err := range itr {
		if err != nil {
			t.Fatalf("scan: %v", err)
		}
		parts := rec.Column(int(rec.Schema().FieldIndices("partition")[0])).(*array.String)
		seqs := rec.Column(int(rec.Schema().FieldIndices("seq")[0])).(*array.Int64)
		for i := range int(rec.NumRows()) {
			out[parts.Value(i)] = append(out[parts.Value(i)], seqs.Value(i))
		}
		rec.Release()
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}
