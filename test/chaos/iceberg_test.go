package chaos_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for the catalog
)

// The Iceberg connector's table: a sql catalog in the matrix's PostgreSQL
// (through each replica's PostgreSQL proxy, so that losing PostgreSQL
// stops it as it stops the PostgreSQL connectors) and a local warehouse
// shared by the replicas.
const (
	icebergNamespace = "chaos"
	icebergTable     = "orders"
)

// icebergSink is the Iceberg connector's sink block. Maintenance runs
// every 20 s, so that compaction, snapshot expiry and orphan removal run
// under the faults too; orphan_age stays well above a commit's length.
func (h *harness) icebergSink(dsn, cols string) string {
	return fmt.Sprintf(`    sink:
      type: iceberg
      catalog: {type: sql, driver: postgres, uri: %q}
      namespace: %s
      table: %s
      warehouse: {dir: %s}
      max_age: 2s
      max_rows: 5000
      maintenance: {every: 20s, keep_snapshots: 20, max_snapshot_age: 1m, orphan_age: 1m, compact: true, compact_target_size: 4MiB}
      columns:
%s`, dsn, icebergNamespace, icebergTable, h.icebergDir(), cols)
}

func (h *harness) icebergDir() string { return filepath.Join(h.runDir, "iceberg") }

// loadIceberg loads the table through iceberg-go's own sql catalog,
// reaching PostgreSQL directly; nil when no replica has created it yet.
func (h *harness) loadIceberg(ctx context.Context) (*table.Table, error) {
	return h.loadIcebergTable(ctx, icebergTable)
}

// icebergDeadLetters reads the sink's dead-letter table (orders_dead_letters,
// which each flush commits before its data) with iceberg-go's scan.
func (h *harness) icebergDeadLetters(ctx context.Context) ([]deadLetter, error) {
	tbl, err := h.loadIcebergTable(ctx, icebergTable+"_dead_letters")
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return nil, err
	}
	_, itr, err := tbl.Scan(table.WithSelectedFields("partition", "sequence_number", "reason")).ToArrowRecords(ctx)
	if err != nil {
		return nil, fmt.Errorf("scan: %w", err)
	}
	var out []deadLetter
	for rec, err := range itr {
		if err != nil {
			return nil, fmt.Errorf("scan: %w", err)
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		parts, ok1 := rec.Column(idx("partition")).(*array.String)
		seqs, ok2 := rec.Column(idx("sequence_number")).(*array.Int64)
		reasons, ok3 := rec.Column(idx("reason")).(*array.String)
		if !ok1 || !ok2 || !ok3 {
			rec.Release()
			return nil, errors.New("the dead-letter table's columns are not partition string, sequence_number int64, reason string")
		}
		for i := range int(rec.NumRows()) {
			out = append(out, deadLetter{pos{parts.Value(i), seqs.Value(i)}, reasons.Value(i)})
		}
		rec.Release()
	}
	return out, nil
}

// loadIcebergTable loads the table name of the connector's namespace; nil
// when no replica has created it yet.
func (h *harness) loadIcebergTable(ctx context.Context, name string) (*table.Table, error) {
	db, err := sql.Open("pgx", h.dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog("ehsink", db, sqlcat.Postgres, ice.Properties{"init_catalog_tables": "false"})
	if err != nil {
		return nil, fmt.Errorf("iceberg catalog: %w", err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{icebergNamespace, name})
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.Is(err, catalog.ErrNoSuchTable) || errors.As(err, &pgErr) && pgErr.Code == "42P01" { // not created, or no catalog tables yet
			return nil, nil
		}
		return nil, fmt.Errorf("iceberg table: %w", err)
	}
	return tbl, nil
}

// icebergWatermarks returns the sequence number the current snapshot's
// summary records for each partition (what the sink resumes from).
func (h *harness) icebergWatermarks(ctx context.Context) (map[string]int64, error) {
	tbl, err := h.loadIceberg(ctx)
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil || tbl.CurrentSnapshot().Summary == nil {
		return nil, err
	}
	prefix := "ehsink." + connIceberg + "." + hubName + "." + connIceberg + ".p"
	out := map[string]int64{}
	for k, v := range tbl.CurrentSnapshot().Summary.Properties {
		p, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		var seq int64
		if _, err := fmt.Sscanf(v, "%d,", &seq); err != nil {
			return nil, fmt.Errorf("snapshot summary %s=%q: %w", k, v, err)
		}
		out[p] = seq
	}
	return out, nil
}

// icebergStats is what the table's metadata holds after the run.
type icebergStats struct {
	snapshots, metadataFiles, dataFiles, unreferenced int
}

// readIceberg scans the current snapshot with iceberg-go (the table's
// manifests say which files hold its rows) and counts what the
// maintenance left: snapshots, metadata files, and data files in the
// warehouse that no manifest references.
func (h *harness) readIceberg(ctx context.Context) ([]row, icebergStats, error) {
	var st icebergStats
	tbl, err := h.loadIceberg(ctx)
	if err != nil || tbl == nil || tbl.CurrentSnapshot() == nil {
		return nil, st, err
	}
	st.snapshots = len(tbl.Metadata().Snapshots())
	scan := tbl.Scan(table.WithSelectedFields("part", "seq", "id"))
	tasks, err := scan.PlanFiles(ctx)
	if err != nil {
		return nil, st, fmt.Errorf("plan the scan: %w", err)
	}
	live := map[string]bool{}
	for _, t := range tasks {
		live[strings.TrimPrefix(t.File.FilePath(), "file://")] = true
	}
	_, itr, err := scan.ToArrowRecords(ctx)
	if err != nil {
		return nil, st, fmt.Errorf("scan: %w", err)
	}
	var out []row
	for rec, err := range itr {
		if err != nil {
			return nil, st, fmt.Errorf("scan: %w", err)
		}
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		parts, ok1 := rec.Column(idx("part")).(*array.String)
		seqs, ok2 := rec.Column(idx("seq")).(*array.Int64)
		ids, ok3 := rec.Column(idx("id")).(*array.String)
		if !ok1 || !ok2 || !ok3 {
			rec.Release()
			return nil, st, fmt.Errorf("scan: part, seq, id are %s: want string, int64, string", rec.Schema())
		}
		for i := range int(rec.NumRows()) {
			out = append(out, row{pos: pos{part: parts.Value(i), seq: seqs.Value(i)}, id: ids.Value(i)})
		}
		rec.Release()
	}
	err = filepath.WalkDir(h.icebergDir(), func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
			return err
		case strings.HasSuffix(p, ".metadata.json"):
			st.metadataFiles++
		case strings.HasSuffix(p, ".parquet") && filepath.Base(filepath.Dir(p)) == "data":
			st.dataFiles++
			if !live[p] {
				st.unreferenced++
			}
		}
		return nil
	})
	return out, st, err
}
