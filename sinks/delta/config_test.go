package delta

import (
	"errors"
	"strings"
	"testing"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func TestValidate(t *testing.T) {
	col := func(name, from, typ string) mapping.Column {
		c, err := mapping.NewColumn(name, from, typ)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := func() *sinkConfig {
		c := newConfig()
		c.Table = "lake/orders"
		c.Columns = mapping.Columns{col("id", "$.id", "string"), col("part", "@partition", "string"), col("n", "$.n", "int64")}
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*sinkConfig)
		field string
	}{
		{"no table", func(c *sinkConfig) { c.Table = "" }, "table"},
		{"uuid column", func(c *sinkConfig) { c.Columns = append(c.Columns, col("u", "$.u", "uuid")) }, "columns.u.type"},
		{"partition not a column", func(c *sinkConfig) { c.PartitionBy = []string{"x"} }, "partition_by[0]"},
		{"nullable partition", func(c *sinkConfig) { c.PartitionBy = []string{"id"} }, "partition_by[0]"},
		{"double partition", func(c *sinkConfig) {
			c.Columns = append(c.Columns, col("d", "$.d", "double"))
			c.Columns[3].Nullable = false
			c.PartitionBy = []string{"d"}
		}, "partition_by[0]"},
		{"day of a string", func(c *sinkConfig) { c.PartitionBy = []string{"day(part)"} }, "partition_by[0]"},
		{"day of a nullable timestamp", func(c *sinkConfig) {
			c.Columns = append(c.Columns, col("ts", "$.ts", "timestamp"))
			c.PartitionBy = []string{"day(ts)"}
		}, "partition_by[0]"},
		{"compression", func(c *sinkConfig) { c.Compression = "lz4" }, "compression"},
		{"negative", func(c *sinkConfig) { c.CheckpointInterval = -1 }, "checkpoint_interval"},
		{"blob without credentials", func(c *sinkConfig) { c.Blob = &blobConfig{Container: "lake"} }, "blob.connection"},
		{"blob both", func(c *sinkConfig) {
			c.Blob = &blobConfig{Container: "lake", Connection: secret.String("UseDevelopmentStorage=true"), AccountURL: "https://a.blob.core.windows.net"}
		}, "blob.account_url"},
		{"blob account url with a path", func(c *sinkConfig) {
			c.Blob = &blobConfig{Container: "lake", AccountURL: "https://a.blob.core.windows.net/lake"}
		}, "blob.account_url"},
		{"blob without container", func(c *sinkConfig) { c.Blob = &blobConfig{AccountURL: "https://a.blob.core.windows.net"} }, "blob.container"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(c)
			err := c.Validate()
			var fe *sinks.FieldError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate: %v, want an error of field %s", err, tc.field)
			}
		})
	}
}

// TestEvolveDefault: evolve follows create_table as the YAML sets it,
// unless evolve itself is set (newConfig's defaults come before the
// YAML, so the default cannot be one of them).
func TestEvolveDefault(t *testing.T) {
	for _, tc := range []struct {
		raw  map[string]any
		want bool
	}{
		{map[string]any{}, true},
		{map[string]any{"create_table": false}, false},
		{map[string]any{"create_table": false, "evolve": true}, true},
		{map[string]any{"evolve": false}, false},
	} {
		c := newConfig()
		if err := config.Decode(tc.raw, c); err != nil {
			t.Fatal(err)
		}
		if got := c.evolves(); got != tc.want {
			t.Errorf("%v: evolves %v, want %v", tc.raw, got, tc.want)
		}
	}
}
