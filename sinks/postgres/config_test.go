package postgres

import (
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// TestConfigDecode decodes a sink block the way the connector loader does
// (config.Decode over the tree YAML loads into), in each columns form.
func TestConfigDecode(t *testing.T) {
	d, _ := (*sinks.Registry)(nil).Lookup("postgres") // nil: the drivers sinks.Register added
	raw := map[string]any{
		"dsn":   "postgres://u:pw@h/db?sslmode=require",
		"table": "sales.orders",
		"mode":  "upsert",
		"key":   []any{"order_id"},
		"columns": map[string]any{
			"order_id": map[string]any{"from": "$.order_id", "type": "bigint"},
			"amount":   map[string]any{"from": "$.amount", "type": "numeric(12,2)", "nullable": true},
			"seq":      "@sequence_number",
		},
		"create_table": true,
		"pool_size":    8,
	}
	cfg := d.NewConfig().(*sinkConfig)
	if err := config.Decode(raw, cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Columns.Names(), ","); got != "amount,order_id,seq" {
		t.Fatalf("columns %s", got)
	}
	if c := cfg.Columns[0]; c.Type != mapping.DecimalType(12, 2) || !c.Nullable {
		t.Fatalf("amount = %+v", c)
	}
	if cfg.PoolSize != 8 || !cfg.CreateTable || cfg.Mode != modeUpsert || cfg.DSN.Reveal() != "postgres://u:pw@h/db?sslmode=require" {
		t.Fatalf("decoded %+v", cfg)
	}
	// evolve follows create_table unless set.
	if !*cfg.withDefaults().Evolve {
		t.Errorf("evolve unset with create_table: true is %v, want true", *cfg.withDefaults().Evolve)
	}
	raw["evolve"] = false
	if err := config.Decode(raw, cfg); err != nil || cfg.Evolve == nil || *cfg.withDefaults().Evolve {
		t.Errorf("evolve: false decoded as %v (%v), want false", cfg.Evolve, err)
	}
	delete(raw, "evolve")

	raw["columns"] = map[string]any{"amount": map[string]any{"from": "amount", "type": "money"}}
	err := config.Decode(raw, d.NewConfig())
	if err == nil {
		t.Fatal("no error for a bad mapping")
	}
	for _, want := range []string{"columns.amount.from", "columns.amount.type"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

// TestConfigDeletes checks the delete settings: what is accepted, and the
// path and reason of each refusal.
func TestConfigDeletes(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"dsn": "postgres://u@h/db", "table": "t", "mode": "upsert", "key": []any{"id"},
			"columns": map[string]any{"id": map[string]any{"from": "$.id", "type": "bigint"}, "name": "$.name"},
		}
	}
	tests := []struct {
		name string
		edit func(map[string]any)
		want string // "" for valid, else "field: reason" substring
	}{
		{"debezium preset", func(m map[string]any) { m["format"] = "debezium" }, ""},
		{"debezium with key sources", func(m map[string]any) {
			m["format"] = "debezium"
			m["delete"] = map[string]any{"key": map[string]any{"id": "$.old_id"}}
		}, ""},
		{"delete condition", func(m map[string]any) {
			m["delete"] = map[string]any{"when": "$.op == 'd'", "key": map[string]any{"id": "$.before.id"}}
		}, ""},
		{"retention", func(m map[string]any) { m["format"] = "debezium"; m["tombstone_retention"] = "720h" }, ""},
		{"unknown format", func(m map[string]any) { m["format"] = "avro" }, `format: "avro": want json or debezium`},
		{"delete needs upsert", func(m map[string]any) {
			m["mode"] = "append"
			delete(m, "key")
			m["delete"] = map[string]any{"when": "$.op == 'd'"}
		}, "delete: deletes need mode: upsert"},
		{"debezium needs upsert", func(m map[string]any) { m["mode"] = "append"; delete(m, "key"); m["format"] = "debezium" }, "format: deletes need mode: upsert"},
		{"delete needs a condition", func(m map[string]any) { m["delete"] = map[string]any{"key": map[string]any{"id": "$.id"}} }, "delete.when: required"},
		{"debezium decides by op", func(m map[string]any) {
			m["format"] = "debezium"
			m["delete"] = map[string]any{"when": "$.op == 'd'"}
		}, "delete.when: not used with format: debezium"},
		{"delete key names a key column", func(m map[string]any) {
			m["format"] = "debezium"
			m["delete"] = map[string]any{"key": map[string]any{"name": "$.name"}}
		}, "delete.key.name: not a key column"},
		{"delete key source", func(m map[string]any) {
			m["format"] = "debezium"
			m["delete"] = map[string]any{"key": map[string]any{"id": "id"}}
		}, "delete.key.id: source \"id\""},
		{"negative retention", func(m map[string]any) { m["tombstone_retention"] = "-1h" }, "tombstone_retention: must not be negative"},
	}
	d, _ := (*sinks.Registry)(nil).Lookup("postgres") // nil: the drivers sinks.Register added
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := base()
			tt.edit(raw)
			cfg := d.NewConfig().(*sinkConfig)
			err := config.Decode(raw, cfg)
			if err == nil {
				err = cfg.Validate()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDDL checks the statements `ehsink validate --print` shows.
func TestDDL(t *testing.T) {
	id, _ := mapping.NewColumn("id", "$.id", "bigint")
	name, _ := mapping.NewColumn("name", "$.name", "")
	cfg := &sinkConfig{DSN: "postgres://h/db", Table: "app.customers", Mode: modeUpsert, Key: []string{"id"},
		Columns: mapping.Columns{id, name}, Format: "debezium", CreateTable: true}
	got := strings.Join(cfg.DDL(), "\n")
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "app"."ehsink_watermarks"`,
		`CREATE TABLE IF NOT EXISTS "app"."ehsink_dead_letters"`,
		`CREATE TABLE IF NOT EXISTS "app"."ehsink_tombstones_customers" ("id" bigint NOT NULL, "_ehsink_partition" text NOT NULL, "_ehsink_seq" bigint NOT NULL, deleted_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY ("id"));`,
		`CREATE TABLE IF NOT EXISTS "app"."customers" ("id" bigint NOT NULL, "name" text, "_ehsink_partition" text NOT NULL, "_ehsink_seq" bigint NOT NULL, PRIMARY KEY ("id"));`,
		// evolve follows create_table
		"-- evolve: an existing table gets the mapped columns it lacks, nullable:\n" +
			`-- ALTER TABLE "app"."customers" ADD COLUMN IF NOT EXISTS "id" bigint;` + "\n" +
			`-- ALTER TABLE "app"."customers" ADD COLUMN IF NOT EXISTS "name" text;`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("DDL lacks %s:\n%s", want, got)
		}
	}
	cfg.CreateTable, cfg.Format = false, ""
	got = strings.Join(cfg.DDL(), "\n")
	if strings.Contains(got, "tombstones") || !strings.Contains(got, "-- create_table is false") || strings.Contains(got, "ALTER TABLE") {
		t.Errorf("append DDL without create_table:\n%s", got)
	}
	cfg.Evolve = new(true)
	if got = strings.Join(cfg.DDL(), "\n"); !strings.Contains(got, `-- ALTER TABLE "app"."customers" ADD COLUMN IF NOT EXISTS "name" text;`) {
		t.Errorf("DDL with evolve: true and no create_table:\n%s", got)
	}
}

// TestDDLRoutes: each route's table and tombstone table, a templated one as
// comments, the state tables in the search_path.
func TestDDLRoutes(t *testing.T) {
	id, _ := mapping.NewColumn("id", "$.id", "bigint")
	cfg := &sinkConfig{DSN: "postgres://h/db", Mode: modeUpsert, Format: "debezium", CreateTable: true, Routes: []routeConfig{
		{When: "$.source.table == 'a'", Table: "s.a", Key: []string{"id"}, Columns: mapping.Columns{id}},
		{Table: "t_{$.source.table}", Key: []string{"id"}, Columns: mapping.Columns{id}},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(cfg.DDL(), "\n")
	for _, want := range []string{
		`CREATE TABLE IF NOT EXISTS "ehsink_watermarks"`,
		`CREATE TABLE IF NOT EXISTS "s"."a" (`,
		`CREATE TABLE IF NOT EXISTS "s"."ehsink_tombstones_a" (`,
		"-- tables named by t_{$.source.table} are prepared when an event first names one:\n-- CREATE TABLE IF NOT EXISTS \"t_{$.source.table}\"",
		`-- CREATE TABLE IF NOT EXISTS "ehsink_tombstones_t_{$.source.table}"`,
		`-- ALTER TABLE "s"."a" ADD COLUMN IF NOT EXISTS "id" bigint;`,
		`-- ALTER TABLE "t_{$.source.table}" ADD COLUMN IF NOT EXISTS "id" bigint;`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("DDL lacks %s:\n%s", want, got)
		}
	}
}
