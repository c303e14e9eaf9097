package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidatePrintShowsDDL prints the Debezium example's effective config:
// the DDL of its PostgreSQL connector follows as comments, with the
// tombstone table of a deleting connector, the table create_table
// derives from the mapping and the columns evolve adds.
func TestValidatePrintShowsDDL(t *testing.T) {
	code, out, errOut := cli(t, "validate", "--print", "-c", filepath.Join("..", "examples", "debezium", "connectors.yaml"))
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"format: debezium",
		"# connector customers-replica: the postgres sink runs at start",
		`#   CREATE TABLE IF NOT EXISTS "ehsink_watermarks" (`,
		`#   CREATE TABLE IF NOT EXISTS "ehsink_tombstones_customers" ("id" integer NOT NULL, "_ehsink_partition" text NOT NULL, "_ehsink_seq" bigint NOT NULL, deleted_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY ("id"));`,
		`#   CREATE TABLE IF NOT EXISTS "customers" ("id" integer NOT NULL, "first_name" text, "last_name" text, "email" text, "created_at" timestamp with time zone, "balance" numeric(10,2), "profile" jsonb, "changed_at" timestamp with time zone NOT NULL, "_ehsink_partition" text NOT NULL, "_ehsink_seq" bigint NOT NULL, PRIMARY KEY ("id"));`,
		// evolve follows create_table: the columns it adds to a table that lacks them
		`#   -- ALTER TABLE "customers" ADD COLUMN IF NOT EXISTS "first_name" text;`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--print lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "postgres://") {
		t.Errorf("--print shows the DSN:\n%s", out)
	}
}

// TestValidatePrintShowsAutoColumns: --print writes columns: auto (and
// flatten) as the config says, so the printed config loads back the same,
// then the columns the reader schema derives and the table they make; a
// connector that derives at start from the registry says so, and prints
// no table it cannot know yet.
func TestValidatePrintShowsAutoColumns(t *testing.T) {
	dir := t.TempDir()
	schema := filepath.Join(dir, "order.avsc")
	writeFile(t, schema, `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},
		{"name":"customer","type":{"type":"record","name":"C","fields":[{"name":"name","type":"string"}]}}]}`)
	path := filepath.Join(dir, "connectors.yaml")
	writeFile(t, path, `
emulator: {hubs: {orders: 1}}
connectors:
  - name: by-reader
    source: {connection: emulator, eventhub: orders, format: avro, registry: {type: azure, reader_schema: `+schema+`}}
    sink: {type: postgres, dsn: "postgres://u:secret@h/db", table: orders, create_table: true, columns: auto, flatten: true}
  - name: by-registry
    source: {connection: emulator, eventhub: orders, format: avro, registry: {type: confluent, subject: orders-value}}
    sink: {type: postgres, dsn: "postgres://u:secret@h/db", table: orders2, create_table: true, columns: auto}
`)
	code, out, errOut := cli(t, "validate", "--print", "-c", path)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"      columns: auto\n      flatten: true\n",
		"# connector by-reader: columns: auto derives from " + schema + ":\n#   - {name: partition, from: \"@partition\", type: string, nullable: false}\n",
		"#   - {name: customer_name, from: \"$.customer.name\", type: string, nullable: false}\n",
		`"id" bigint NOT NULL, "customer_name" text NOT NULL`,
		"# connector by-registry: columns: auto is derived at start from the newest schema of orders-value in the registry\n",
		"# connector by-registry: the postgres sink's statements depend on the columns derived at start\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--print lacks %q:\n%s", want, out)
		}
	}
	// What --print wrote loads back.
	printed := filepath.Join(dir, "printed.yaml")
	writeFile(t, printed, strings.ReplaceAll(out, "***", "postgres://u@h/db"))
	if code, _, errOut := cli(t, "validate", "-c", printed); code != exitOK {
		t.Errorf("the printed config does not load: %s", errOut)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
