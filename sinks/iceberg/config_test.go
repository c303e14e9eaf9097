package iceberg

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func TestValidateNamesEachField(t *testing.T) {
	base := func(t *testing.T) *sinkConfig { return newLake(t).config(t) }
	for _, tc := range []struct {
		name  string
		edit  func(c *sinkConfig)
		field string
		msg   string
	}{
		{"no catalog type", func(c *sinkConfig) { c.Catalog.Type = "" }, "catalog.type", "required"},
		{"unknown catalog", func(c *sinkConfig) { c.Catalog.Type = "hive" }, "catalog.type", "hive"},
		{"unknown driver", func(c *sinkConfig) { c.Catalog.Driver = "mysql" }, "catalog.driver", "mysql"},
		{"no uri", func(c *sinkConfig) { c.Catalog.URI = "" }, "catalog.uri", "required"},
		{"postgres uri", func(c *sinkConfig) { c.Catalog.Driver = "postgres"; c.Catalog.URI = "host=x" }, "catalog.uri", "postgres://"},
		{"rest uri", func(c *sinkConfig) { c.Catalog = catalogConfig{Type: "rest", URI: "ftp://x"} }, "catalog.uri", "http"},
		{"rest token and credential", func(c *sinkConfig) {
			c.Catalog = catalogConfig{Type: "rest", URI: "https://cat.example", Token: "t", Credential: "a:b"}
		}, "catalog.token", "not both"},
		{"no warehouse", func(c *sinkConfig) { c.Warehouse = warehouseConfig{} }, "warehouse", "required"},
		{"two warehouses", func(c *sinkConfig) {
			c.Warehouse.Blob = &blobConfig{Connection: secret.String("UseDevelopmentStorage=true"), Container: "lake"}
		}, "warehouse.blob", "not both"},
		{"blob without container", func(c *sinkConfig) {
			c.Warehouse = warehouseConfig{Blob: &blobConfig{Connection: secret.String("UseDevelopmentStorage=true")}}
		}, "warehouse.blob.container", "required"},
		{"no namespace", func(c *sinkConfig) { c.Namespace = "" }, "namespace", "required"},
		{"empty namespace level", func(c *sinkConfig) { c.Namespace = "a..b" }, "namespace", "empty level"},
		{"dotted table", func(c *sinkConfig) { c.Table = "a.b" }, "table", "."},
		{"no columns", func(c *sinkConfig) { c.Columns = nil }, "columns", "at least one"},
		{"decimal without precision", func(c *sinkConfig) {
			col, _ := mapping.NewColumn("amount", "$.amount", "decimal")
			c.Columns[c.Columns.Index("amount")] = col
		}, "columns.amount.type", "precision"},
		{"unknown transform", func(c *sinkConfig) { c.Partition = []partitionField{{Column: "ts", Transform: "week"}} }, "partition[0].transform", "week"},
		{"partition of no column", func(c *sinkConfig) { c.Partition = []partitionField{{Column: "nope", Transform: "day"}} }, "partition[0].column", "nope"},
		{"routes beside table", func(c *sinkConfig) { cols := c.Columns; routed(c); c.Table = "orders"; c.Routes[0].Columns = cols }, "table", "per route"},
		{"route without table", func(c *sinkConfig) { routed(c); c.Routes[1].Table = "" }, "routes[1].table", "required"},
		{"template without routes", func(c *sinkConfig) { c.Table = "t_{$.type}" }, "table", "needs routes"},
		{"bad template", func(c *sinkConfig) { routed(c); c.Routes[1].Table = "t_{$.type" }, "routes[1].table", ""},
		{"negative max_tables", func(c *sinkConfig) { routed(c); c.Routes[1].Table = "t_{$.type}"; c.Routes[1].MaxTables = -1 }, "routes[1].max_tables", "negative"},
		{"two routes one table", func(c *sinkConfig) { routed(c); c.Routes[1].Table = "big" }, "routes[1].table", "routes[0]"},
		{"route after the default", func(c *sinkConfig) { routed(c); c.Routes[0].When = "" }, "routes[1].when", "never reached"},
		{"bad route condition", func(c *sinkConfig) { routed(c); c.Routes[0].When = "$.a ==" }, "routes[0].when", ""},
		{"route without columns", func(c *sinkConfig) { routed(c); c.Routes[0].Columns = nil }, "routes[0].columns", "at least one"},
		{"route partition of no column", func(c *sinkConfig) {
			routed(c)
			c.Routes[1].Partition = []partitionField{{Column: "nope"}}
		}, "routes[1].partition[0].column", "nope"},
		{"dead letters in the table", func(c *sinkConfig) { c.DeadLetterTable = "orders" }, "dead_letter_table", "is the table"},
		{"dead letters in a route's table", func(c *sinkConfig) { routed(c); c.DeadLetterTable = "rest" }, "dead_letter_table", "routes[1]"},
		{"dotted dead-letter table", func(c *sinkConfig) { c.DeadLetterTable = "a.b" }, "dead_letter_table", "."},
		{"negative max_rows", func(c *sinkConfig) { c.MaxRows = -1 }, "max_rows", "negative"},
		{"negative keep_snapshots", func(c *sinkConfig) { c.Maintenance.KeepSnapshots = -1 }, "maintenance.keep_snapshots", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base(t)
			tc.edit(c)
			err := c.Validate()
			var fe *sinks.FieldError
			found := false
			for _, e := range flatten(err) {
				if errors.As(e, &fe) && fe.Field == tc.field && strings.Contains(fe.Err.Error(), tc.msg) {
					found = true
				}
			}
			if !found {
				t.Fatalf("Validate() = %v, want a FieldError %s containing %q", err, tc.field, tc.msg)
			}
		})
	}
	if err := base(t).Validate(); err != nil {
		t.Fatalf("the base config: %v", err)
	}
	c := base(t)
	routed(c)
	if err := c.Validate(); err != nil {
		t.Fatalf("the routed config: %v", err)
	}
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// TestExistingTableMustFit opens an existing table with columns that do not
// fit it: the error names the table and the column.
func TestExistingTableMustFit(t *testing.T) {
	l := newLake(t)
	l.newSink(t, nil).Close(context.Background())
	for _, tc := range []struct {
		name string
		edit func(c *sinkConfig)
		want string
	}{
		{"another type", func(c *sinkConfig) {
			col, _ := mapping.NewColumn("seq", "@sequence_number", "string")
			c.Columns[c.Columns.Index("seq")] = col
		}, `column "seq" (string): the table's field is long`},
		{"unknown column, evolve: false", func(c *sinkConfig) {
			col, _ := mapping.NewColumn("region", "$.region", "string")
			c.Columns, c.Evolve = append(c.Columns, col), new(false)
		}, `column "region": the table has no such field (its fields: id, partition, seq, customer, amount, ts, enqueued, key, source; evolve: true adds it)`},
		// evolve adds fields; it never changes one's type.
		{"another type, evolve: true", func(c *sinkConfig) {
			col, _ := mapping.NewColumn("seq", "@sequence_number", "string")
			c.Columns[c.Columns.Index("seq")], c.Evolve = col, new(true)
		}, `column "seq" (string): the table's field is long`},
		{"required field left out", func(c *sinkConfig) {
			c.Columns = append(c.Columns[:2:2], c.Columns[3:]...) // seq is required (not nullable)
		}, `field "seq": the table requires it`},
		{"nullable into required", func(c *sinkConfig) {
			c.Columns[c.Columns.Index("seq")].Nullable = true
		}, `column "seq": the table's field is required`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := l.config(t)
			tc.edit(c)
			_, err := newIcebergSink(context.Background(), c, testInfo)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "table lake.orders does not fit") {
				t.Fatalf("New: %v, want an error naming lake.orders and containing %q", err, tc.want)
			}
		})
	}
}

// TestWarehouseAccountURL: a warehouse reached by account_url gives
// iceberg-go the account's endpoint and no connection string (so its Azure
// IO uses DefaultAzureCredential), for Azure's account host and for the
// emulator's path-style account; the table location is the account's
// abfs:// URL in the account URL's cloud.
func TestWarehouseAccountURL(t *testing.T) {
	for _, c := range []struct{ url, loc, endpoint, protocol string }{
		{"https://acct.blob.core.windows.net", "abfs://wh@acct.dfs.core.windows.net/tables", "blob.core.windows.net", "https"},
		{"https://acct.blob.core.usgovcloudapi.net/", "abfs://wh@acct.dfs.core.usgovcloudapi.net/tables", "blob.core.usgovcloudapi.net", "https"},
		{"https://127.0.0.1:10000/devstoreaccount1", "abfs://wh@devstoreaccount1.dfs.core.windows.net/tables", "127.0.0.1:10000", "https"},
	} {
		cfg := &sinkConfig{Warehouse: warehouseConfig{Blob: &blobConfig{AccountURL: c.url, Container: "wh", Path: "/tables/"}}}
		loc, props, err := cfg.warehouseLocation()
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		want := map[string]string{"adls.endpoint": c.endpoint, "adls.protocol": c.protocol}
		if loc != c.loc || !maps.Equal(props, want) {
			t.Errorf("%s: location %q, props %v; want %q, %v", c.url, loc, props, c.loc, want)
		}
	}
}
