package postgres

import (
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/table/expr"
)

// DDL returns the statements a sink of c runs when it starts, in order,
// each ending with a semicolon: the state tables, then per route its
// table derived from the mapping and, for a deleting connector, its
// tombstone table. Without create_table the table's statement is a
// comment, showing the table the mapping expects. A route whose table is
// a template gets its statements, as comments, for the template's name:
// they run when an event first names a table. With evolve, each table's
// ALTER TABLE statements follow, as comments: the sink runs those a table
// that exists needs (a table may not exist when this is printed). c must
// be valid.
func (c *sinkConfig) DDL() []string {
	d := c.withDefaults()
	upsert := d.Mode == modeUpsert
	var state pgx.Identifier // the connection's search_path for routed connectors
	if len(d.Routes) == 0 {
		parts, err := splitTable(d.Table)
		if err != nil {
			return nil
		}
		state = pgx.Identifier(parts)
	}
	out := []string{
		watermarkDDL(qualify(state, watermarkTableName)) + ";",
		deadLetterDDL(qualify(state, deadLetterTableName)) + ";",
	}
	for _, r := range d.routes() {
		cols := slices.Clone(r.Columns)
		for i := range cols {
			if slices.Contains(r.Key, cols[i].Name) {
				cols[i].Nullable = false
			}
		}
		var stmts []string
		templated := false
		if t, err := expr.CompileTemplate(r.Table); err == nil && !t.Literal() {
			templated = true
		}
		target := pgx.Identifier{r.Table} // a template is shown as written
		if !templated {
			parts, _ := splitTable(r.Table)
			target = pgx.Identifier(parts)
		}
		table := createTableSQL(target, cols, r.Key, upsert) + ";"
		if !d.CreateTable {
			table = "-- create_table is false: the table must exist, with columns such as\n-- " + table
		}
		stmts = append(stmts, table)
		if upsert && d.changeSpec(r).Deletes() {
			stmts = append(stmts, tombstoneDDL(tombstoneTable(target), cols, r.Key)+";")
		}
		if templated {
			out = append(out, "-- tables named by "+r.Table+" are prepared when an event first names one:")
			for _, s := range stmts {
				out = append(out, "-- "+s)
			}
		} else {
			out = append(out, stmts...)
		}
		if *d.Evolve {
			out = append(out, "-- evolve: an existing table gets the mapped columns it lacks, nullable:")
			for _, c := range cols {
				out = append(out, "-- "+addColumnSQL(target, c.Name, pgType(c.Type))+";")
			}
		}
	}
	return out
}
