package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/table/mapping"
)

// Every statement of the sink is built here, once, from quoted
// identifiers of the configuration; event content only ever travels as
// parameters or COPY data.

const (
	watermarkTableName  = "ehsink_watermarks"
	deadLetterTableName = "ehsink_dead_letters"
)

// qualify puts name in the schema of the target table (or none; target
// may be nil).
func qualify(target pgx.Identifier, name string) pgx.Identifier {
	if len(target) == 2 {
		return pgx.Identifier{target[0], name}
	}
	return pgx.Identifier{name}
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// pgType is the column type create_table uses for a mapping type.
func pgType(t mapping.Type) string {
	switch t.Kind {
	case mapping.KindString:
		return "text"
	case mapping.KindInt32:
		return "integer"
	case mapping.KindInt64:
		return "bigint"
	case mapping.KindDouble:
		return "double precision"
	case mapping.KindDecimal:
		if t.Precision == 0 {
			return "numeric"
		}
		return "numeric(" + itoa(t.Precision) + "," + itoa(t.Scale) + ")"
	case mapping.KindBoolean:
		return "boolean"
	case mapping.KindTimestamp:
		return "timestamp with time zone"
	case mapping.KindJSON:
		return "jsonb"
	case mapping.KindUUID:
		return "uuid"
	case mapping.KindBytes:
		return "bytea"
	}
	return "text"
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// compatible lists, per mapping kind, the column types (as format_type
// prints them, without modifiers) that the sink's Go values encode into
// without loss.
func compatible(k mapping.Kind) []string {
	switch k {
	case mapping.KindString:
		return []string{"text", "character varying", "character", "citext", "name"}
	case mapping.KindInt32:
		return []string{"integer", "bigint", "numeric"}
	case mapping.KindInt64:
		return []string{"bigint", "numeric"}
	case mapping.KindDouble:
		return []string{"double precision"}
	case mapping.KindDecimal:
		return []string{"numeric"}
	case mapping.KindBoolean:
		return []string{"boolean"}
	case mapping.KindTimestamp:
		return []string{"timestamp with time zone", "timestamp without time zone"}
	case mapping.KindJSON:
		return []string{"jsonb", "json"}
	case mapping.KindUUID:
		return []string{"uuid"}
	case mapping.KindBytes:
		return []string{"bytea"}
	}
	return nil
}

// createTableSQL derives the target table from the mapping.
func createTableSQL(target pgx.Identifier, cols mapping.Columns, key []string, upsert bool) string {
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + target.Sanitize() + " (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(c.Name) + " " + pgType(c.Type))
		if !c.Nullable {
			b.WriteString(" NOT NULL")
		}
	}
	if upsert {
		b.WriteString(", " + quote(partitionColumn) + " text NOT NULL, " + quote(seqColumn) + " bigint NOT NULL")
		b.WriteString(", PRIMARY KEY (" + quoteList(key) + ")")
	}
	b.WriteString(")")
	return b.String()
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quote(n)
	}
	return strings.Join(q, ", ")
}

func watermarkDDL(t pgx.Identifier) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (
	connector text NOT NULL,
	namespace text NOT NULL,
	eventhub text NOT NULL,
	consumer_group text NOT NULL,
	table_name text NOT NULL,
	partition_id text NOT NULL,
	sequence_number bigint NOT NULL,
	"offset" text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (connector, namespace, eventhub, consumer_group, table_name, partition_id))`
}

func deadLetterDDL(t pgx.Identifier) string {
	return `CREATE TABLE IF NOT EXISTS ` + t.Sanitize() + ` (
	id bigserial PRIMARY KEY,
	connector text NOT NULL,
	namespace text NOT NULL,
	eventhub text NOT NULL,
	consumer_group text NOT NULL,
	table_name text NOT NULL,
	partition_id text NOT NULL,
	sequence_number bigint NOT NULL,
	"offset" text NOT NULL,
	enqueued_time timestamptz,
	partition_key text,
	content_type text,
	properties jsonb,
	body bytea,
	reason text NOT NULL,
	failed_at timestamptz NOT NULL,
	config_revision text,
	replayed_at timestamptz)`
}

// columnDef is a column to add: its name, and its type as DDL writes it.
type columnDef struct{ name, typ string }

// deadLetterAdded are the columns ehsink_dead_letters gained after its
// first release: a table created before them gets them at start
// (addMissingColumns).
var deadLetterAdded = []columnDef{{"content_type", "text"}, {"config_revision", "text"}, {"replayed_at", "timestamptz"}}

// missingColumnSQL selects the name of each column of $2 (a text[]) that
// table $1 (a qualified name) lacks.
const missingColumnSQL = `SELECT c FROM unnest($2::text[]) AS c
	WHERE NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = c AND attnum > 0 AND NOT attisdropped)`

// addColumnSQL adds a column to table t unless it has it.
func addColumnSQL(t pgx.Identifier, column, typ string) string {
	return `ALTER TABLE ` + t.Sanitize() + ` ADD COLUMN IF NOT EXISTS ` + pgx.Identifier{column}.Sanitize() + ` ` + typ
}

// alterTypeSQL changes the type of column of table t, casting the values
// it holds: what a user runs to make the table fit a mapping whose type
// changed (the sink never does).
func alterTypeSQL(t pgx.Identifier, column, typ string) string {
	c := pgx.Identifier{column}.Sanitize()
	return `ALTER TABLE ` + t.Sanitize() + ` ALTER COLUMN ` + c + ` TYPE ` + typ + ` USING ` + c + `::` + typ
}

// deadLetterColumns are the columns the sink copies into ehsink_dead_letters.
func deadLetterColumns() []string {
	return []string{"connector", "namespace", "eventhub", "consumer_group", "table_name", "partition_id",
		"sequence_number", "offset", "enqueued_time", "partition_key", "content_type", "properties", "body", "reason", "failed_at", "config_revision"}
}

// watermarkWhere is the key of a watermark row: $1..$6.
const watermarkWhere = `connector = $1 AND namespace = $2 AND eventhub = $3 AND consumer_group = $4 AND table_name = $5 AND partition_id = $6`

func readWatermarkSQL(t pgx.Identifier) string {
	return `SELECT sequence_number, "offset" FROM ` + t.Sanitize() + ` WHERE ` + watermarkWhere
}

// insertWatermarkSQL creates the first watermark of a partition; a row that
// appeared meanwhile (another owner) makes it insert nothing: fence lost.
func insertWatermarkSQL(t pgx.Identifier) string {
	return `INSERT INTO ` + t.Sanitize() + ` (connector, namespace, eventhub, consumer_group, table_name, partition_id, sequence_number, "offset", updated_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now()) ON CONFLICT DO NOTHING`
}

// advanceWatermarkSQL moves the watermark forward only from the value the
// writer read ($9): the fence.
func advanceWatermarkSQL(t pgx.Identifier) string {
	return `UPDATE ` + t.Sanitize() + ` SET sequence_number = $7, "offset" = $8, updated_at = now() WHERE ` + watermarkWhere + ` AND sequence_number = $9`
}

// copySQL copies rows in the binary format into table.
func copySQL(table pgx.Identifier, cols []string) string {
	return `COPY ` + table.Sanitize() + ` (` + quoteList(cols) + `) FROM STDIN BINARY`
}

// describeSQL selects the copied columns; its description gives their
// types for the binary encoding.
func describeSQL(table pgx.Identifier, cols []string) string {
	return `SELECT ` + quoteList(cols) + ` FROM ` + table.Sanitize()
}

// upsertSQL merges rows passed as one array per column ($1..$n, in the
// order of copyCols: the mapped columns and _ehsink_seq, each cast to
// arrayTypes[i]) into the target, guarded by the hidden ordering columns;
// the partition of the flush is $n+1.
//
// Per row, the server spends its time in the speculative insertion of ON
// CONFLICT (an arbiter index probe, the heap insert, the index insert),
// about 9-11 µs per new row and 11-14 µs per updated row at 5,000 rows per
// transaction, against 1-2 µs for COPY into the target. Measured on
// PostgreSQL 15, the forms that first COPY the rows into a staging table
// pay for the stage on top: emptying a temporary table ON COMMIT DELETE
// ROWS costs about 0.7 ms per transaction (truncating its TOAST table and
// rebuilding its index), TRUNCATE 1.9 ms, a table per transaction (ON
// COMMIT DROP) 2.8 ms, an unlogged table 2.3 ms, and DELETE leaves dead
// rows no autovacuum reclaims in a temporary table (33 µs per row after a
// thousand flushes); and the COPY is one more round trip. MERGE
// (PostgreSQL 15) fails a key inserted by another partition at the same
// time with a unique violation instead of updating, and on a stage without
// statistics chose plans costing up to 67 µs per row; UPDATE … FROM then
// INSERT … WHERE NOT EXISTS costs more on both paths. Arrays through
// unnest need no stage, travel with the statement (and COMMIT) in one
// round trip, and were the cheapest: in make bench-e2e the server spent
// 8.9 µs per row against 13.7-16.4 with the staging table.
//
// With tombstones (a connector that deletes), a row is only inserted or
// updated when no tombstone of its key holds a later delete of the same
// partition (see deletes.go).
func upsertSQL(target pgx.Identifier, copyCols, arrayTypes, key []string, tombstones pgx.Identifier) string {
	p, s := quote(partitionColumn), quote(seqColumn)
	var set []string
	for _, c := range copyCols {
		if !contains(key, c) {
			set = append(set, quote(c)+" = EXCLUDED."+quote(c))
		}
	}
	set = append(set, p+" = EXCLUDED."+p)
	arrays := make([]string, len(copyCols))
	for i := range copyCols {
		arrays[i] = "$" + itoa(i+1) + "::" + arrayTypes[i]
	}
	cols := quoteList(copyCols)
	return `INSERT INTO ` + target.Sanitize() + ` AS t (` + cols + `, ` + p + `) SELECT ` + cols + `, $` + itoa(len(copyCols)+1) + `::text` +
		` FROM unnest(` + strings.Join(arrays, ", ") + `) AS u (` + cols + `)` +
		notDeletedLater(tombstones, key, "u", "$"+itoa(len(copyCols)+1)) +
		` ON CONFLICT (` + quoteList(key) + `) DO UPDATE SET ` + strings.Join(set, ", ") +
		` WHERE t.` + s + ` IS NULL OR t.` + p + ` IS DISTINCT FROM EXCLUDED.` + p + ` OR t.` + s + ` < EXCLUDED.` + s
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// columnsSQL lists a table's columns, their types without modifiers, the
// modifier (varchar length, numeric precision and scale; -1 for none), the
// type as written, and the array type of the column's type (what the
// upsert casts its parameters to). The array type is named by its catalog
// name (pg_catalog._bpchar), not by format_type: format_type names a
// char(n) array "character[]", which as a cast means char(1)[] and would
// cut every value to its first character.
const columnsSQL = `SELECT a.attname, format_type(a.atttypid, NULL), a.atttypmod, format_type(a.atttypid, a.atttypmod),
		coalesce(quote_ident(an.nspname) || '.' || quote_ident(at.typname), '')
	FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		LEFT JOIN pg_type at ON at.oid = t.typarray LEFT JOIN pg_namespace an ON an.oid = at.typnamespace
	WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped`

// varHeader is what PostgreSQL adds to the length or precision it keeps in
// a type modifier (VARHDRSZ).
const varHeader = 4

// charLimit returns the length limit of a character varying(n) or
// character(n) column, in characters, or 0 when it has none.
func charLimit(typ string, typmod int32) int {
	if (typ == "character varying" || typ == "character") && typmod > varHeader {
		return int(typmod - varHeader)
	}
	return 0
}

// numericLimit returns the precision and scale of a numeric(p,s) column,
// or ok false when it has none.
func numericLimit(typ string, typmod int32) (precision, scale int, ok bool) {
	if typ != "numeric" || typmod < varHeader {
		return 0, 0, false
	}
	m := typmod - varHeader
	return int(m>>16) & 0xffff, int(m) & 0xffff, true
}
