package iceberg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for a sql catalog on PostgreSQL
	_ "modernc.org/sqlite"           // database/sql driver "sqlite", pure Go (no cgo)

	"github.com/ehsink/ehsink/internal/table/commit"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	tableshape "github.com/ehsink/ehsink/sinks/table"
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

// sink appends each partition's events to its Iceberg tables: one table,
// or the table of each event's route. It is safe for concurrent use; each
// of its writers is used by one goroutine at a time.
type sink struct {
	cfg  sinkConfig
	info sinks.Info
	log  *slog.Logger
	cat  catalog.Catalog
	db   *sql.DB // the sql catalog's database, nil for rest
	// restWarehouse is the location under which a REST catalog is asked
	// to place a table the sink creates ("": where the catalog chooses).
	restWarehouse string
	// dests are the tables, one per route, in the routes' order (nil for
	// a route whose table is a template: tmpls holds it); sel picks an
	// event's route (nil: the one table of a sink without routes).
	dests []*dest
	tmpls []*expr.Template
	sel   *routing.Selector
	ns    table.Identifier
	// shape is the routes' mapping, which templated tables map with.
	shape tableshape.Shape
	// mu guards named and owners: the tables templated routes have named.
	mu     sync.Mutex
	named  map[string]*namedDest
	owners *routing.Owners
	// dl is the dead-letter table.
	dl  *dest
	now func() time.Time
	// hook, when set by a test, is called at each step of a commit and
	// may fail it there (crash tests).
	hook func(step string) error
	// soloCommits, set by a benchmark, makes each commit alone, as
	// before commits were grouped (writer.commit): the same-run baseline.
	soloCommits bool
	closed      atomic.Bool
}

// dest is one table of the sink.
type dest struct {
	route  string // the route's name, in reports
	ident  table.Identifier
	cols   mapping.Columns
	mapper *mapping.Mapper
	// file is the schema of the data files: the columns with the table's
	// field IDs; arrow is its Arrow schema.
	file  *ice.Schema
	arrow *arrow.Schema
	// mu serializes the commits of the sink's writers to this table: they
	// would otherwise lose the optimistic race to each other. It also
	// guards lastMaintenance, and the stores to tbl, so that metadata
	// loaded before a commit of this sink never replaces the newer
	// metadata that commit returned. A writer takes it with lock, which
	// gives up when the writer's call ends.
	mu sync.Mutex
	// tbl is the newest metadata this sink has seen. It is read without
	// mu: a flush writing its data files does not wait for a commit or
	// maintenance in progress, which may hang on an unreachable catalog.
	tbl atomic.Pointer[table.Table]
	// queued are the commits writers wait to make (writer.commit); qmu
	// guards it, apart from mu, which the commit in progress holds.
	qmu    sync.Mutex
	queued []*commitReq
	// lastMaintenance is when maintenance last ran.
	lastMaintenance time.Time
}

func (d *dest) name() string { return strings.Join(d.ident, ".") }

// namedDest is a table a templated route named: its dest, or why it
// cannot be written (looked at again after routing.RetryUnwritableAfter).
type namedDest struct {
	d        *dest
	err      error
	failedAt time.Time
}

// current returns the newest table metadata the sink has seen.
func (d *dest) current() *table.Table { return d.tbl.Load() }

// lock takes d.mu with the caller's context (commit.LockTurn).
func (d *dest) lock(ctx context.Context) error {
	if err := commit.LockTurn(ctx, &d.mu); err != nil {
		return fmt.Errorf("table %s: waiting for the turn to commit: %w", d.name(), err)
	}
	return nil
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
	if err := s.openCatalog(ctx); err != nil {
		return fail(unreachable(err))
	}
	ns := catalog.ToIdentifier(strings.Split(c.Namespace, ".")...)
	if err := s.ensureNamespace(ctx, ns); err != nil {
		return fail(unreachable(err))
	}
	s.ns = ns
	if s.shape, err = c.TableShape(); err != nil {
		return fail(err)
	}
	s.named, s.owners = map[string]*namedDest{}, newOwners(&c)
	var conds []routing.Cond
	var names []string
	for i, r := range c.routes() {
		rt := s.shape.Routes[i]
		tmpl, _ := expr.CompileTemplate(r.Table) // checked by Validate
		var d *dest
		if tmpl.Literal() {
			if d, err = s.openDest(ctx, ns, rt.Name, r.Table, r.Columns, r.Partition); err != nil {
				return fail(err)
			}
			d.mapper, tmpl = rt.Mapper, nil
		}
		s.dests, s.tmpls = append(s.dests, d), append(s.tmpls, tmpl)
		var cond routing.Cond
		if r.When != "" {
			if cond, err = routing.CompileCondition(r.When); err != nil {
				return fail(fmt.Errorf("route %s: when: %w", rt.Name, err))
			}
		}
		conds, names = append(conds, cond), append(names, rt.Name)
	}
	if s.shape.Routed {
		s.sel = routing.NewSelector(conds, names)
	}
	if s.dl, err = s.openDest(ctx, ns, "dead letters", c.deadLetterTable(), deadLetterColumns(), nil); err != nil {
		return fail(err)
	}
	return s, nil
}

// openDest loads (or creates) the table name of namespace ns with the
// columns and partition spec, and checks that the columns fit it.
func (s *sink) openDest(ctx context.Context, ns table.Identifier, route, name string, cols mapping.Columns, partition []partitionField) (*dest, error) {
	d := &dest{route: route, ident: append(slices.Clone(ns), name), cols: cols, lastMaintenance: s.now()}
	tbl, err := s.loadOrCreate(ctx, d, partition)
	if err != nil {
		return nil, err
	}
	d.tbl.Store(tbl)
	if *s.cfg.Evolve {
		if err := s.evolve(ctx, d); err != nil {
			return nil, fmt.Errorf("table %s: add the columns it lacks: %w", d.name(), err)
		}
	}
	if d.file, err = fileSchema(d.tbl.Load().Schema(), cols); err != nil {
		return nil, fmt.Errorf("table %s does not fit the columns: %w", d.name(), err)
	}
	if d.arrow, err = arrowSchema(d.file); err != nil {
		return nil, err
	}
	return d, nil
}

// namedBy returns the table that the templated route i names for ev,
// loading or creating it the first time. An error of the event (a name
// the template cannot render, or that is not a table name, a table past
// max_tables or another route's, a table whose schema does not fit) is
// returned as evErr; err is a catalog that cannot be reached.
func (s *sink) namedBy(ctx context.Context, i int, ev *sinks.Event) (d *dest, evErr, err error) {
	rt, r := s.shape.Routes[i], s.cfg.routes()[i]
	name, evErr := renderTable(rt.Name, s.tmpls[i], ev)
	if evErr != nil {
		return nil, evErr, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.owners.Check(i, name); err != nil {
		return nil, err, nil
	}
	nd := s.named[name]
	if nd != nil && (nd.err == nil || s.now().Sub(nd.failedAt) < routing.RetryUnwritableAfter) {
		return nd.d, nd.err, nil
	}
	d, err = s.openDest(ctx, s.ns, rt.Name, name, r.Columns, r.Partition)
	if err != nil && sinks.IsTransient(unreachable(err)) {
		return nil, nil, fmt.Errorf("route %s: table %s: %w", rt.Name, name, unreachable(err))
	}
	if nd == nil {
		nd = &namedDest{}
		s.named[name] = nd
		s.owners.Add(i, name)
	}
	if err != nil {
		nd.d, nd.err, nd.failedAt = nil, fmt.Errorf("route %s: table %s: %w", rt.Name, name, err), s.now()
		s.log.Warn("a table named by events cannot be written; its events are dead letters", "route", rt.Name, "table", name, "err", err)
		return nil, nd.err, nil
	}
	d.mapper = rt.Mapper
	nd.d, nd.err = d, nil
	return d, nil, nil
}

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
		dialect, dsn := sqlcat.Postgres, cc.URI.Reveal()
		if cc.Driver == "sqlite" {
			dialect = sqlcat.SQLite
			if dir := filepath.Dir(dsn); dir != "" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					return fmt.Errorf("catalog.uri: %w", err)
				}
			}
			// Writers of several processes (and this one's connections)
			// wait for the database's lock rather than fail at once.
			dsn = "file:" + dsn + "?_pragma=busy_timeout(30000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)"
		}
		var db *sql.DB
		if cc.Driver == "sqlite" {
			db, err = sql.Open("sqlite", dsn)
		} else {
			db, err = openPostgresCatalog(dsn)
		}
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

// catalogIdleInTransaction is the idle_in_transaction_session_timeout of
// a PostgreSQL catalog's sessions. A table's commit updates its catalog
// row in a transaction; a replica whose path to the server goes half-open
// between that UPDATE and its COMMIT leaves the transaction open on the
// server, holding the row's lock, and every other replica's commit to the
// table waits behind it until the server's TCP notices the dead client
// (two hours by default; the chaos matrix saw every Iceberg partition of
// the healthy replicas unread for as long as the fault lasted). The
// server ends such a session after this long, rolling it back. The
// transaction is BEGIN, UPDATE, COMMIT sent back to back (the metadata
// file is written before), so only a client that stopped answering
// reaches it; and it must be short beside errors.sink_timeout, which the
// other replicas' commits wait under: with 10 s, their commits timed out
// at the matrix's 5 s and they gave their partitions up too.
const catalogIdleInTransaction = 2 * time.Second

// openPostgresCatalog opens the sql catalog's PostgreSQL database with
// its sessions named (application_name ehsink) and ended by the server
// when idle in a transaction for catalogIdleInTransaction. Parameters the
// URI sets are kept.
func openPostgresCatalog(dsn string) (*sql.DB, error) {
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	for name, v := range map[string]string{
		"application_name":                    "ehsink",
		"idle_in_transaction_session_timeout": fmt.Sprint(catalogIdleInTransaction.Milliseconds()),
	} {
		if _, set := cc.RuntimeParams[name]; !set {
			cc.RuntimeParams[name] = v
		}
	}
	return stdlib.OpenDB(*cc), nil
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
func (s *sink) loadOrCreate(ctx context.Context, d *dest, partition []partitionField) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, d.ident)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("load table %s: %w", d.name(), unreachable(err))
	}
	sc, err := newSchema(d.cols)
	if err != nil {
		return nil, err
	}
	spec, err := newSpec(partition, sc)
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
		opts = append(opts, catalog.WithLocation(s.restWarehouse+"/"+strings.Join(d.ident, "/")))
	}
	tbl, err = s.cat.CreateTable(ctx, d.ident, sc, opts...)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		// Another replica created it first.
		tbl, err = s.cat.LoadTable(ctx, d.ident)
	}
	if err != nil {
		return nil, fmt.Errorf("create table %s: %w", d.name(), unreachable(err))
	}
	s.log.Info("created iceberg table", "table", d.name(), "location", tbl.Location())
	return tbl, nil
}

// evolve adds to d's table the columns of d.cols its schema lacks, as
// optional fields (the table's rows so far have no value for them) with
// new field IDs. The update asserts the schema it was built on; a commit
// that loses the race to another writer (another replica adding the same
// fields, or a data commit) is made again on the table as it is then,
// which may need nothing more.
func (s *sink) evolve(ctx context.Context, d *dest) error {
	for attempt := 1; ; attempt++ {
		sc := d.tbl.Load().Schema()
		tx := d.tbl.Load().NewTransaction()
		update := tx.UpdateSchema(true, false)
		var added []string
		for _, c := range d.cols {
			if _, ok := sc.FindFieldByName(c.Name); ok {
				continue
			}
			t, err := icebergType(c.Type)
			if err != nil {
				return fmt.Errorf("column %q: %w", c.Name, err)
			}
			update.AddColumn([]string{c.Name}, t, "", false, nil)
			added = append(added, c.Name)
		}
		if len(added) == 0 {
			return nil
		}
		if err := update.Commit(); err != nil {
			return fmt.Errorf("schema update: %w", err)
		}
		tbl, err := tx.Commit(ctx)
		if err == nil {
			d.tbl.Store(tbl)
			for _, name := range added {
				f, _ := tbl.Schema().FindFieldByName(name)
				s.log.Info("added column", "table", d.name(), "column", name, "type", f.Type.String(), "field_id", f.ID)
			}
			return nil
		}
		if !lostRace(err) || attempt >= maxCommitAttempts {
			return fmt.Errorf("commit the schema: %w", unreachable(err))
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
		if _, err := s.reload(ctx, d); err != nil {
			return unreachable(err)
		}
	}
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

// Open prepares the writer of a partition: it reloads each table, reads
// the partition's watermark from the snapshot summaries, and removes the
// data files earlier writers of the partition wrote and never committed
// (older than maintenance.orphan_age, so that a commit still in flight
// keeps its files). ctx bounds the call only.
//
// Without routes it returns the table's watermark: the partition resumes
// after it. With routes it returns none: a flush commits its tables one
// after the other, so no table's watermark says the others hold as much;
// the partition resumes from its checkpoint (written only once every
// table of a flush committed), and each table skips what it holds.
func (s *sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if s.closed.Load() {
		return nil, nil, sinks.ErrClosed
	}
	fail := func(err error) (sinks.Writer, *sinks.Position, error) {
		return nil, nil, fmt.Errorf("connector %q partition %s: open: %w", s.info.Connector, partition, err)
	}
	w := &writer{s: s, partition: partition, key: watermarkKey(s.info, partition), log: s.log.With("partition", partition)}
	w.tag = fileTag(w.key)
	// The dead letters commit first: a flush that fails after them
	// replays its events, whose letters the table then skips.
	var err error
	if w.dl, err = w.openPart(ctx, s.dl); err != nil {
		w.release()
		return fail(err)
	}
	for _, d := range s.dests {
		var p *part
		if d != nil {
			if p, err = w.openPart(ctx, d); err != nil {
				w.release()
				return fail(err)
			}
		}
		w.parts = append(w.parts, p)
	}
	if s.sel == nil {
		w.parts[0].always = true
	}
	if s.sel != nil {
		return w, nil, nil
	}
	return w, w.parts[0].watermark, nil
}

// openPart reloads d's table, reads the partition's watermark there and
// removes the partition's files no commit took; the part joins w.all.
func (w *writer) openPart(ctx context.Context, d *dest) (*part, error) {
	tbl, err := w.s.refresh(ctx, d)
	if err != nil {
		return nil, unreachable(err)
	}
	wm, err := watermarkOf(tbl.Metadata(), w.key)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", d.name(), err)
	}
	if err := w.s.removeUncommitted(ctx, tbl, w.tag); err != nil {
		return nil, unreachable(fmt.Errorf("table %s: %w", d.name(), err))
	}
	p := &part{d: d, watermark: wm, rows: newRowBuilder(d.cols, d.arrow)}
	w.all = append(w.all, p)
	return p, nil
}

// refresh loads the table's current metadata from the catalog. It holds
// d.mu while loading, so that metadata loaded before a commit of this
// sink never replaces the newer metadata that commit returned.
func (s *sink) refresh(ctx context.Context, d *dest) (*table.Table, error) {
	if err := d.lock(ctx); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	return s.reload(ctx, d)
}

// reload is refresh for a caller that holds d.mu (maintenance).
func (s *sink) reload(ctx context.Context, d *dest) (*table.Table, error) {
	tbl, err := s.cat.LoadTable(ctx, d.ident)
	if err != nil {
		return nil, fmt.Errorf("load table %s: %w", d.name(), err)
	}
	d.tbl.Store(tbl)
	return tbl, nil
}
