package postgres

import (
	"strings"
	"testing"

	"github.com/ehsink/ehsink/config"
	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/sinks"
)

// TestConfigDecode decodes a sink block the way the connector loader does
// (config.Decode over the tree YAML loads into), in each columns form.
func TestConfigDecode(t *testing.T) {
	d, _ := sinks.Lookup("postgres")
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
	cfg := d.NewConfig().(*Config)
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
	if cfg.PoolSize != 8 || !cfg.CreateTable || cfg.Mode != ModeUpsert || cfg.DSN.Reveal() != "postgres://u:pw@h/db?sslmode=require" {
		t.Fatalf("decoded %+v", cfg)
	}

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
