package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

func init() { sinks.Register("postgres", driver{}) }

// driver is the registered sinks.Driver.
type driver struct{}

// NewConfig returns a Config with its defaults set.
func (driver) NewConfig() any {
	return &sinkConfig{Mode: modeAppend, PoolSize: defaultPoolSize, Format: cdc.FormatJSON, TombstoneRetention: defaultTombstoneRetention}
}

// New builds a Sink from a *Config.
func (driver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*sinkConfig)
	if !ok {
		return nil, fmt.Errorf("postgres: config is %T, want *postgres.Config", cfg)
	}
	return newPostgresSink(ctx, c, info)
}

// fault points: the seam tests use to crash a flush at a given step.
const (
	faultBeforeCopy   = "before-copy"   // in the transaction, the fence taken, before any COPY
	faultBeforeCommit = "before-commit" // everything copied, before COMMIT
)

// sink writes events into PostgreSQL tables: one, or one per route. It is
// safe for concurrent use; its writers are not (one goroutine per
// partition).
type sink struct {
	pool   *pgxpool.Pool
	cfg    sinkConfig
	info   sinks.Info
	log    *slog.Logger
	upsert bool

	routes []*route
	sel    *routing.Selector // nil without routes
	// deletes: some events delete their key (see deletes.go); cleanup
	// spaces the removal of old tombstones.
	deletes bool
	cleanup cleanupClock
	// wmTable is the table_name of the connector's watermark and dead-letter
	// rows: the table, or "*" for a routed connector.
	wmTable string

	mu     sync.Mutex       // guards the 3 following fields
	dests  map[string]*dest // tables of templated routes, by rendered name
	owners *routing.Owners  // which route writes each table
	nextID int              // the id of the next dest

	watermarks, deadLetters pgx.Identifier
	sqlReadWM, sqlInsertWM  string
	sqlAdvanceWM            string
	// sqlMarkReplayed and sqlFailedAgain update a dead letter a replay
	// took (deadletters.go).
	sqlMarkReplayed, sqlFailedAgain string

	// faults, when set (by tests only), is called at each fault point of
	// a flush; an error aborts the flush there, as a crash would.
	faults func(point string) error

	closeOnce sync.Once
}

// route is one compiled route (the whole connector's, without routes).
type route struct {
	name   string
	cfg    routeConfig
	tmpl   *expr.Template // nil for a literal table
	mapper *mapping.Mapper
	// rules, for a connector that deletes (format: debezium or a delete
	// block), decide per event between a row, a delete and a skip; nil
	// otherwise (see deletes.go).
	rules    *cdc.Rules
	copyCols []string // mapped columns, then _ehsink_seq in upsert mode
	keyIdx   []int    // positions of the key columns in a row
	storable storable // what PostgreSQL cannot store, checked per row
	static   *dest    // the table of a route without placeholders
	index    int      // in the connector's routes
}

// dest is one target table and the statements that write it.
type dest struct {
	id     int
	r      *route
	name   string // as configured or rendered, for messages
	target pgx.Identifier
	// charLimits are the varchar(n) and char(n) columns, checked per event.
	charLimits      []charLimitCol
	sqlCopy         string // append: COPY target (copyCols) FROM STDIN BINARY
	sqlDescribeCopy string // append: SELECT copyCols FROM target, for the column types
	// sqlUpsert merges rows given as arrays (upsertSQL); set by
	// prepareDest, which knows the columns' array types.
	sqlUpsert string
	// tombstones is the table's tombstone table when its route deletes;
	// sqlDelete deletes keys given as arrays (deleteSQL, set by
	// prepareDest).
	tombstones pgx.Identifier
	sqlDelete  string
	// err, for a templated table that cannot be written (missing, wrong
	// columns), is the reason its events are dead letters; failedAt says
	// when it was found, to look again later.
	err      error
	failedAt time.Time
}

// newPostgresSink connects to the database, checks (or creates) the target tables and
// the sink's state tables, and returns the sink. ctx bounds the call only.
// cfg is validated first; its defaults are applied to a copy. Tables of
// templated routes are checked when an event first names them.
func newPostgresSink(ctx context.Context, cfg *sinkConfig, info sinks.Info) (*sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: connector %q: %w", info.Connector, err)
	}
	c := cfg.withDefaults()
	s := &sink{
		cfg:     c,
		info:    info,
		log:     info.Logger,
		upsert:  c.Mode == modeUpsert,
		wmTable: c.Table,
		dests:   map[string]*dest{},
		owners:  newTableOwners(&c),
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var conds []routing.Cond
	var names []string
	for i, rc := range c.routes() {
		r, err := s.compileRoute(rc)
		if err != nil {
			return nil, fmt.Errorf("postgres: connector %q: routes[%d]: %w", info.Connector, i, err)
		}
		r.index = i
		var cond routing.Cond
		if rc.When != "" {
			if cond, err = routing.CompileCondition(rc.When); err != nil {
				return nil, fmt.Errorf("postgres: connector %q: routes[%d].when: %w", info.Connector, i, err)
			}
		}
		conds, names = append(conds, cond), append(names, r.name)
		s.deletes = s.deletes || r.rules != nil
		s.routes = append(s.routes, r)
	}
	var stateSchema pgx.Identifier
	if len(c.Routes) > 0 {
		s.wmTable = routesTableName
		s.sel = routing.NewSelector(conds, names)
	} else {
		stateSchema = s.routes[0].static.target
	}
	s.watermarks = qualify(stateSchema, watermarkTableName)
	s.deadLetters = qualify(stateSchema, deadLetterTableName)
	s.sqlReadWM = readWatermarkSQL(s.watermarks)
	s.sqlInsertWM = insertWatermarkSQL(s.watermarks)
	s.sqlAdvanceWM = advanceWatermarkSQL(s.watermarks)
	s.sqlMarkReplayed = markReplayedSQL(s.deadLetters)
	s.sqlFailedAgain = failedAgainSQL(s.deadLetters)

	pc, err := connstr.Postgres(c.DSN.Reveal())
	if err != nil {
		return nil, fmt.Errorf("postgres: connector %q: dsn: %w", info.Connector, err)
	}
	cc := pc.ConnConfig
	sessionTimeouts(cc, c)
	// The schema is prepared on a connection of its own first.
	if err := s.prepare(ctx, cc.Copy()); err != nil {
		return nil, err
	}
	pc.MaxConns = int32(c.PoolSize)
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn)
		return nil
	}
	// A pooled session reports its traffic to the sink call that holds it.
	pc.PrepareConn = func(ctx context.Context, conn *pgx.Conn) (bool, error) {
		reportProgress(conn, sinks.Progress(ctx))
		return true, nil
	}
	pc.AfterRelease = func(conn *pgx.Conn) bool {
		reportProgress(conn, nil)
		return true
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("postgres: connector %q: pool: %w", info.Connector, classify(err))
	}
	return s, nil
}

// sessionTimeouts bounds what a dead path costs the sink's connections:
// the dialer's keepalive and TCP user timeout close a half-open connection
// in seconds (package netdial); the connect timeout bounds a dial into a
// blackhole (the DSN's connect_timeout, when given, wins); and the session
// timeouts make the server itself end a statement or an open transaction
// whose client went silent, freeing its locks for the partition's next
// owner. The sessions are named (application_name "ehsink") so that the
// next owner can tell the sink's own orphaned sessions from other
// clients' (orphans.go). A session parameter the DSN sets is kept.
func sessionTimeouts(cc *pgx.ConnConfig, c sinkConfig) {
	cc.DialFunc = dialWatched
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = netdial.ConnectTimeout
	}
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "ehsink"
	}
	for name, d := range map[string]time.Duration{
		"statement_timeout":                   c.StatementTimeout,
		"idle_in_transaction_session_timeout": c.IdleInTransactionTimeout,
	} {
		if _, set := cc.RuntimeParams[name]; set || d <= 0 {
			continue
		}
		cc.RuntimeParams[name] = strconv.FormatInt(d.Milliseconds(), 10)
	}
}

// dialWatched dials with netdial's socket settings a connection that
// reports its traffic (sinks.Progress) to the sink call that dialed it, so
// that the connection's handshake counts as answers; once pooled, the call
// that acquires it takes over (PrepareConn).
func dialWatched(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := netdial.Dialer().DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	w := netdial.Watch(c)
	w.Notify(sinks.Progress(ctx))
	return w, nil
}

// reportProgress makes conn's traffic go to fn (nil: nowhere): the
// errors.sink_timeout of the runner's call then measures the silence
// between the server's answers, so a slow server is not taken for a dead
// one.
func reportProgress(conn *pgx.Conn, fn func()) {
	if w, ok := netdial.Watched(conn.PgConn().Conn()); ok {
		w.Notify(fn)
	}
}

// compileRoute compiles one route; a route without placeholders gets its
// dest.
func (s *sink) compileRoute(rc routeConfig) (*route, error) {
	mapper, rules, err := s.cfg.compileMapping(rc)
	if err != nil {
		return nil, err
	}
	cols := mapper.Columns()
	tmpl, err := expr.CompileTemplate(rc.Table)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	r := &route{name: routeName(rc), cfg: rc, mapper: mapper, rules: rules, copyCols: cols.Names(), storable: newStorable(cols)}
	if s.upsert {
		// The partition is the same for every row of a flush: the merge
		// takes it as a parameter rather than as one more array.
		r.copyCols = append(r.copyCols, seqColumn)
		for _, k := range rc.Key {
			r.keyIdx = append(r.keyIdx, cols.Index(k))
		}
	}
	if !tmpl.Literal() {
		r.tmpl = tmpl
	} else {
		parts, err := splitTable(rc.Table)
		if err != nil {
			return nil, fmt.Errorf("table: %w", err)
		}
		r.static = s.newDest(r, rc.Table, parts)
	}
	return r, nil
}

// newDest builds the dest of table name (split into parts) for route r.
// The caller holds s.mu or owns s alone.
func (s *sink) newDest(r *route, name string, parts []string) *dest {
	d := &dest{id: s.nextID, r: r, name: name, target: pgx.Identifier(parts)}
	s.nextID++
	d.sqlCopy = copySQL(d.target, r.copyCols)
	d.sqlDescribeCopy = describeSQL(d.target, r.copyCols)
	return d
}

// prepare creates the state tables and creates or checks the tables of
// the routes without placeholders.
func (s *sink) prepare(ctx context.Context, cc *pgx.ConnConfig) error {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("postgres: connector %q: "+format, append([]any{s.info.Connector}, args...)...)
	}
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return errf("connect: %w", classify(err))
	}
	defer conn.Close(context.WithoutCancel(ctx))

	tx, err := conn.Begin(ctx)
	if err != nil {
		return errf("%w", classify(err))
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := lockSchema(ctx, tx); err != nil {
		return errf("%w", err)
	}
	for _, ddl := range []string{watermarkDDL(s.watermarks), deadLetterDDL(s.deadLetters)} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return errf("create state table: %w", classify(err))
		}
	}
	// A dead-letter table made by an older release gets the columns added
	// since.
	if _, err := addMissingColumns(ctx, tx, s.deadLetters, deadLetterAdded); err != nil {
		return errf("dead-letter table %s: %w", s.deadLetters.Sanitize(), err)
	}
	for _, r := range s.routes {
		if r.static == nil {
			continue
		}
		if err := s.prepareDest(ctx, tx, r.static); err != nil {
			return errf("table %s: %w", r.static.name, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return errf("%w", classify(err))
	}
	return nil
}

// addMissingColumns adds to table t the columns of cols it lacks, and
// returns those it added. The catalog is read first, so that a table that
// has them all (every start but the first after a change) takes no ACCESS
// EXCLUSIVE lock, which would queue behind the other replicas' flushes and
// hold up everything behind it. ADD COLUMN IF NOT EXISTS keeps the step
// idempotent; replicas starting together take turns on lockSchema's lock,
// and the second finds the column there. The caller's transaction holds
// that lock.
func addMissingColumns(ctx context.Context, tx pgx.Tx, t pgx.Identifier, cols []columnDef) ([]columnDef, error) {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	rows, err := tx.Query(ctx, missingColumnSQL, t.Sanitize(), names)
	if err != nil {
		return nil, fmt.Errorf("read its columns: %w", classify(err))
	}
	missing, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read its columns: %w", classify(err))
	}
	var added []columnDef
	for _, c := range cols {
		if !slices.Contains(missing, c.name) {
			continue
		}
		if _, err := tx.Exec(ctx, addColumnSQL(t, c.name, c.typ)); err != nil {
			return nil, fmt.Errorf("add column %s: %w", c.name, classify(err))
		}
		added = append(added, c)
	}
	return added, nil
}

// evolveColumns gives d's table the mapped columns it lacks (evolve:
// true). They are nullable whatever the mapping says: the rows already in
// the table have no value for them.
func (s *sink) evolveColumns(ctx context.Context, tx pgx.Tx, d *dest) error {
	var cols []columnDef
	for _, c := range d.r.mapper.Columns() {
		cols = append(cols, columnDef{c.Name, pgType(c.Type)})
	}
	added, err := addMissingColumns(ctx, tx, d.target, cols)
	if err != nil {
		return err
	}
	for _, c := range added {
		s.log.Info("added column", "table", d.name, "column", c.name, "type", c.typ)
	}
	return nil
}

// lockSchema serialises the sink's DDL: replicas starting together would
// race on CREATE TABLE IF NOT EXISTS (a unique violation in pg_type).
func lockSchema(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('ehsink schema'))`); err != nil {
		return fmt.Errorf("lock: %w", classify(err))
	}
	return nil
}

// errNoTable is wrapped by prepareDest's error for a missing table that
// create_table does not create.
var errNoTable = errors.New("table does not exist (create it, or set create_table: true to derive it from the columns)")

// prepareDest creates or checks d's table in tx and, for upserts, checks
// that the key has a unique index.
func (s *sink) prepareDest(ctx context.Context, tx pgx.Tx, d *dest) error {
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, d.target.Sanitize()).Scan(&exists); err != nil {
		return classify(err)
	}
	if !exists {
		if !s.cfg.CreateTable {
			return errNoTable
		}
		if _, err := tx.Exec(ctx, createTableSQL(d.target, d.r.mapper.Columns(), d.r.cfg.Key, s.upsert)); err != nil {
			return fmt.Errorf("create table: %w", classify(err))
		}
		s.log.Info("created table", "table", d.name)
	} else if *s.cfg.Evolve {
		if err := s.evolveColumns(ctx, tx, d); err != nil {
			return err
		}
	}
	arrayTypes, err := s.checkColumns(ctx, tx, d)
	if err != nil {
		return err
	}
	if d.r.rules != nil {
		d.tombstones = tombstoneTable(d.target)
		if err := s.prepareDeletes(ctx, tx, d, arrayTypes); err != nil {
			return err
		}
	}
	if s.upsert {
		d.sqlUpsert = upsertSQL(d.target, d.r.copyCols, arrayTypes, d.r.cfg.Key, d.tombstones)
		// Running the merge on no rows (NULL arrays unnest to nothing)
		// makes the server check the ON CONFLICT target, and changes
		// nothing.
		args := make([]any, len(d.r.copyCols)+1)
		args[len(d.r.copyCols)] = ""
		if _, err := tx.Exec(ctx, d.sqlUpsert, args...); err != nil {
			return fmt.Errorf("key (%s) must be the primary key or have a unique index: %w", strings.Join(d.r.cfg.Key, ", "), classify(err))
		}
	}
	return nil
}

// checkColumns compares d's table's columns with the mapping, and returns
// the array types of the copied columns (d.r.copyCols).
func (s *sink) checkColumns(ctx context.Context, tx pgx.Tx, d *dest) ([]string, error) {
	rows, err := tx.Query(ctx, columnsSQL, d.target.Sanitize())
	if err != nil {
		return nil, classify(err)
	}
	type column struct {
		typ, written, array string
		typmod              int32
	}
	types := map[string]string{}
	table := map[string]column{}
	for rows.Next() {
		var name string
		var c column
		if err := rows.Scan(&name, &c.typ, &c.typmod, &c.written, &c.array); err != nil {
			return nil, err
		}
		types[name], table[name] = c.typ, c
	}
	if err := rows.Err(); err != nil {
		return nil, classify(err)
	}
	var errs []error
	d.charLimits = d.charLimits[:0]
	for i, col := range d.r.mapper.Columns() {
		typ, ok := types[col.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("column %q: not in the table; add it (%s;) or set evolve: true",
				col.Name, addColumnSQL(d.target, col.Name, pgType(col.Type))))
		case !slices.Contains(compatible(col.Type.Kind), typ):
			// Evolution never changes a column's type: a cast can fail on
			// rows already there, or lose what they hold.
			errs = append(errs, fmt.Errorf("column %q: the table has %s, the mapping says %s (want one of %s); change the mapping's type, or the column's (%s;)",
				col.Name, typ, col.Type, strings.Join(compatible(col.Type.Kind), ", "), alterTypeSQL(d.target, col.Name, pgType(col.Type))))
		}
		// Limits the table sets are checked per event (a value that breaks
		// one is that event's error, not a failed COPY of the whole batch).
		c := table[col.Name]
		if n := charLimit(c.typ, c.typmod); n > 0 && col.Type.Kind == mapping.KindString {
			d.charLimits = append(d.charLimits, charLimitCol{index: i, max: n})
		}
		if p, sc, ok := numericLimit(c.typ, c.typmod); ok && col.Type.Kind == mapping.KindDecimal &&
			(col.Type.Precision == 0 || col.Type.Precision-col.Type.Scale > p-sc || col.Type.Scale > sc) {
			errs = append(errs, fmt.Errorf("column %q: the table has %s, the mapping says %s; declare at most numeric(%d,%d) in the mapping so that a value out of range is rejected with its event instead of failing the batch",
				col.Name, c.written, col.Type, p, sc))
		}
	}
	if s.upsert {
		if types[partitionColumn] != "text" || types[seqColumn] != "bigint" {
			errs = append(errs, fmt.Errorf("upsert needs the hidden ordering columns: ALTER TABLE %s ADD COLUMN %s text, ADD COLUMN %s bigint",
				d.target.Sanitize(), quote(partitionColumn), quote(seqColumn)))
		}
	}
	arrays := make([]string, len(d.r.copyCols))
	for i, c := range d.r.copyCols {
		arrays[i] = table[c].array
	}
	return arrays, errors.Join(errs...)
}

// Open reads the partition's watermark and returns a writer for it.
func (s *sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	wm, err := s.readWatermark(ctx, partition)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: connector %q partition %s: read watermark: %w", s.info.Connector, partition, err)
	}
	w := &writer{s: s, partition: partition, wm: wm}
	return w, clonePos(wm), nil
}

func (s *sink) wmKey(partition string) []any {
	return []any{s.info.Connector, s.info.Namespace, s.info.EventHub, s.info.ConsumerGroup, s.wmTable, partition}
}

func (s *sink) readWatermark(ctx context.Context, partition string) (*sinks.Position, error) {
	var p sinks.Position
	err := s.pool.QueryRow(ctx, s.sqlReadWM, s.wmKey(partition)...).Scan(&p.SequenceNumber, &p.Offset)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, classify(err)
	}
	return &p, nil
}

// Close closes the sink's idle connections; connections in use by writers
// are closed as they are returned. It is idempotent.
func (s *sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.pool != nil {
			s.pool.Close()
		}
	})
	return nil
}

func (s *sink) fault(point string) error {
	if s.faults == nil {
		return nil
	}
	return s.faults(point)
}

func clonePos(p *sinks.Position) *sinks.Position {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
