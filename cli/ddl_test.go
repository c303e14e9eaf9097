package cli

import (
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
