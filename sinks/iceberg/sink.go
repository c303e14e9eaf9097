package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	ice "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	_ "github.com/apache/iceberg-go/catalog/rest" // registers catalog type rest
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	_ "github.com/apache/iceberg-go/io/gocloud/azure" // abfs:// and wasb:// warehouses
	"github.com/apache/iceberg-go/table"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for a sql catalog on PostgreSQL
	_ "modernc.org/sqlite"             // database/sql driver "sqlite", pure Go (no cgo)

	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func init() { sinks.Register("iceberg", driver{}) }

// driver is the registered sinks.Driver of the iceberg sink.
type driver struct{}

// NewConfig returns a *sinkConfig with its defaults set.
func (driver) NewConfig() any { return newConfig() }

// New builds a Sink from a *sinkConfig made by NewConfig.
func (driver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*sinkConfig)
	if !ok {
		return nil, fmt.Errorf("iceberg: config is %T, want *iceberg.sinkConfig", cfg)
	}
	return newIcebergSink(ctx, c, info)
}

// sink appends each partition's events to one Iceberg table. It is safe
// for concurrent use; each of its writers is used by one goroutine at a
// time.
type sink struct {
	cfg  sinkConfig
	info sinks.Info
	log  *slog.Logger
	cat  catalog.Catalog
	db   *sql.DB // the sql catalog's database, nil for rest
	// restWarehouse is the location under which a REST catalog is asked
	// to place a table the sink creates ("": where the catalog chooses).
	restWarehouse string
	ident         table.Identifier
	mapper        *mapping.Mapper
	// file is the schema of the data files: the columns with the table's
	// field IDs; arrow is its Arrow schema.
	file  *ice.Schema
	arrow *arrow.Schema
	// commitMu serializes the commits of this sink's writers: they all
	// commit to one table, and would otherwise lose the optimistic race to
	// each other. It also guards tbl.
	commitMu sync.Mutex
	tbl      *table.Table // the newest metadata this sink has seen
	// lastMaintenance is when maintenance last ran (guarded by commitMu).
	lastMaintenance time.Time
	now             func() time.Time
	// hook, when set by a test, is called at each step of a commit and
	// may fail it there (crash tests).
	hook   func(step string) error
	closed atomic.Bool
}

// newIcebergSink connects to the catalog, creates the namespace and the
// table if missing, and checks the columns against the table's schema. ctx
// bounds these calls only; newIcebergSink starts no goroutines.
func newIcebergSink(ctx context.Context, cfg *sinkConfig, info sinks.Info) (_ *sink, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("iceberg sink of connector %q: %w", info.Connector, err)
	}
	c := *cfg
	c.withDefaults()
	s := &sink{cfg: c, info: info, log: info.Logger, now: time.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("sink", "iceberg", "dest", c.String())
	fail := func(err error) (*sink, error) {
		s.closeCatalog()
		return nil, fmt.Errorf("iceberg sink of connector %q: %w", info.Connector, err)
	}
	if s.mapper, err = mapping.CompileWith(c.Columns, mapping.Options{Explode: c.Explode}); err != nil {
		return fail(err)
	}
	if err := s.openCatalog(ctx); err != nil {
		return fail(unreachable(err))
	}
	ns := catalog.ToIdentifier(strings.Split(c.Namespace, ".")...)
	s.ident = append(ns, c.Table)
	if err := s.ensureNamespace(ctx, ns); err != nil {
		return fail(unreachable(err))
	}
	if s.tbl, err = s.loadOrCreate(ctx); err != nil {
		return fail(err)
	}
	if s.file, err = fileSchema(s.tbl.Schema(), c.Columns); err != nil {
		return fail(fmt.Errorf("table %s does not fit the columns: %w", s.tableName(), err))
	}
	if s.arrow, err = arrowSchema(s.file); err != nil {
		return fail(err)
	}
	s.lastMaintenance = s.now()
	return s, nil
}

func (s *sink) tableName() string { return strings.Join(s.ident, ".") }

// openCatalog connects to the configured catalog.
func (s *sink) openCatalog(ctx context.Context) error {
	cc := s.cfg.Catalog
	loc, ioProps, err := s.cfg.warehouseLocation()
	if err != nil {
		return err
	}
	props := ice.Properties{}
	for k, v := range cc.Properties {
		props[k] = v.Reveal()
	}
	for k, v := range ioProps {
		props[k] = v
	}
	if s.cfg.Warehouse.Dir != "" {
		if err := os.MkdirAll(s.cfg.Warehouse.Dir, 0o755); err != nil {
			return fmt.Errorf("warehouse.dir: %w", err)
		}
	}
	switch cc.Type {
	case "sql":
		if loc != "" {
			props["warehouse"] = loc
		}
		dialect, driverName, dsn := sqlcat.Postgres, "pgx", cc.URI.Reveal()
		if cc.Driver == "sqlite" {
			dialect, driverName = sqlcat.SQLite, "sqlite"
			if dir := filepath.Dir(dsn); dir != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return fmt.Errorf("catalog.uri: %w", err)
				}
			}
			// Writers of several processes (and this one's connections)
			// wait for the database's lock rather than fail at once.
			dsn = "file:" + dsn + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
		}
		db, err := sql.Open(driverName, dsn)
		if err != nil {
			return fmt.Errorf("catalog: open %s database: %w", cc.Driver, err)
		}
		if err := db.PingContext(ctx); err != nil {
			db.Close()
			return fmt.Errorf("catalog: %s database: %w", cc.Driver, err)
		}
		cat, err := sqlcat.NewCatalog(cc.Name, db, dialect, props)
		if err != nil {
			db.Close()
			return fmt.Errorf("catalog: %w", err)
		}
		s.db, s.cat = db, cat
	case "rest":
		props["type"] = "rest"
		props["uri"] = cc.URI.Reveal()
		if cc.Credential != "" {
			props["credential"] = cc.Credential.Reveal()
		}
		if cc.Token != "" {
			props["token"] = cc.Token.Reveal()
		}
		if cc.Warehouse != "" {
			props["warehouse"] = cc.Warehouse
		}
		cat, err := catalog.Load(ctx, cc.Name, props)
		if err != nil {
			return fmt.Errorf("catalog: %w", err)
		}
		// A REST catalog places a table itself unless it is told where:
		// the configured warehouse, when there is one.
		s.restWarehouse = loc
		s.cat = cat
	}
	return nil
}

func (s *sink) closeCatalog() {
	if cl, ok := s.cat.(catalog.Closer); ok {
		_ = cl.Close()
	}
	if s.db != nil {
		_ = s.db.Close()
	}
}

func (s *sink) ensureNamespace(ctx context.Context, ns table.Identifier) error {
	ok, err := s.cat.CheckNamespaceExists(ctx, ns)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", s.cfg.Namespace, err)
	}
	if ok {
		return nil
	}
	if err := s.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
		return fmt.Errorf("create namespace %s: %w", s.cfg.Namespace, err)
	}
	return nil
}

// loadOrCreate loads the table, creating it if missing with the columns,
// the partition spec and properties that keep its metadata bounded.
func (s *sink) loadOrCreate(ctx context.Context) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, s.ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("load table %s: %w", s.tableName(), unreachable(err))
	}
	sc, err := newSchema(s.cfg.Columns)
	if err != nil {
		return nil, err
	}
	spec, err := newSpec(s.cfg.Partition, sc)
	if err != nil {
		return nil, err
	}
	props := ice.Properties{
		table.MetadataDeleteAfterCommitEnabledKey: "true",
		table.MetadataPreviousVersionsMaxKey:      fmt.Sprint(s.cfg.Maintenance.KeepMetadataFiles),
		"write.parquet.compression-codec":         "zstd",
		// Each commit appends a manifest; merged, as Java Iceberg does by
		// default, the snapshot's manifests do not grow with the commits.
		table.ManifestMergeEnabledKey: "true",
	}
	for k, v := range s.cfg.Properties {
		props[k] = v
	}
	opts := []catalog.CreateTableOpt{catalog.WithPartitionSpec(&spec), catalog.WithProperties(props)}
	if s.restWarehouse != "" {
		opts = append(opts, catalog.WithLocation(s.restWarehouse+"/"+strings.Join(s.ident, "/")))
	}
	tbl, err = s.cat.CreateTable(ctx, s.ident, sc, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		// Another replica created it first.
		tbl, err = s.cat.LoadTable(ctx, s.ident)
	}
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", s.tableName(), unreachable(err))
	}
	s.log.Info("created iceberg table", "table", s.tableName(), "location", tbl.Location())
	return tbl, nil
}

// current returns the newest table metadata the sink has seen.
func (s *sink) current() *table.Table {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	return s.tbl
}

// Close closes the catalog. Writers must be closed first. Close is
// idempotent.
func (s *sink) Close(context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	s.closeCatalog()
	return nil
}

// Open prepares the writer of a partition: it reloads the table, reads the
// partition's watermark from the snapshot summaries, and removes the data
// files earlier writers of the partition wrote and never committed (older
// than maintenance.orphan_age, so that a commit still in flight keeps its
// files). ctx bounds the call only.
func (s *sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if s.closed.Load() {
		return nil, nil, sinks.ErrClosed
	}
	fail := func(err error) (sinks.Writer, *sinks.Position, error) {
		return nil, nil, fmt.Errorf("connector %q partition %s: open: %w", s.info.Connector, partition, err)
	}
	tbl, err := s.refresh(ctx)
	if err != nil {
		return fail(unreachable(err))
	}
	w := &writer{s: s, partition: partition, key: watermarkKey(s.info, partition), log: s.log.With("partition", partition)}
	w.tag = fileTag(w.key)
	if w.watermark, err = watermarkOf(tbl.Metadata(), w.key); err != nil {
		return fail(err)
	}
	if err := s.removeUncommitted(ctx, tbl, w.tag); err != nil {
		return fail(unreachable(err))
	}
	w.rows = newRowBuilder(s.cfg.Columns, s.arrow)
	return w, w.watermark, nil
}

// refresh loads the table's current metadata from the catalog. It holds
// commitMu while loading, so that metadata loaded before a commit of this
// sink never replaces the newer metadata that commit returned.
func (s *sink) refresh(ctx context.Context) (*table.Table, error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	tbl, err := s.cat.LoadTable(ctx, s.ident)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", s.tableName(), err)
	}
	s.tbl = tbl
	return tbl, nil
}
