package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func init() { sinks.Register("postgres", driver{}) }

// driver is the registered sinks.Driver.
type driver struct{}

// NewConfig returns a Config with its defaults set.
func (driver) NewConfig() any {
	return &Config{Mode: ModeAppend, PoolSize: DefaultPoolSize}
}

// New builds a Sink from a *Config.
func (driver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*Config)
	if !ok {
		return nil, fmt.Errorf("postgres: config is %T, want *postgres.Config", cfg)
	}
	return New(ctx, c, info)
}

// fault points: the seam tests use to crash a flush at a given step.
const (
	faultBeforeCopy   = "before-copy"   // in the transaction, the fence taken, before any COPY
	faultBeforeCommit = "before-commit" // everything copied, before COMMIT
)

// Sink writes events into one PostgreSQL table. It is safe for concurrent
// use; its writers are not (one goroutine per partition).
type Sink struct {
	pool   *pgxpool.Pool
	cfg    Config
	info   sinks.Info
	log    *slog.Logger
	mapper *mapping.Mapper
	upsert bool

	target   pgx.Identifier
	copyCols []string // mapped columns, then _ehsink_seq in upsert mode
	keyIdx   []int    // positions of the key columns in a row
	nulCheck []int    // string columns: PostgreSQL text cannot hold NUL
	// charLimits are the varchar(n) and char(n) columns, checked per event.
	charLimits []charLimitCol
	jsonCheck  []int // json columns: jsonb cannot hold \u0000

	watermarks, deadLetters pgx.Identifier
	sqlReadWM, sqlInsertWM  string
	sqlAdvanceWM, sqlUpsert string
	copyTable               pgx.Identifier // the target, or the staging table for upserts
	sqlCopy                 string         // COPY copyTable (copyCols) FROM STDIN BINARY
	sqlDescribeCopy         string         // SELECT copyCols FROM copyTable, for the column types

	// faults, when set (by tests only), is called at each fault point of
	// a flush; an error aborts the flush there, as a crash would.
	faults func(point string) error

	closeOnce sync.Once
}

// New connects to the database, checks (or creates) the target table and
// the sink's state tables, and returns the sink. ctx bounds the call only.
// cfg is validated first; its defaults are applied to a copy.
func New(ctx context.Context, cfg *Config, info sinks.Info) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: connector %q: %w", info.Connector, err)
	}
	c := cfg.withDefaults()
	cols := slices.Clone(c.Columns)
	for i := range cols {
		if slices.Contains(c.Key, cols[i].Name) {
			cols[i].Nullable = false // a key column must have a value
		}
	}
	mapper, err := mapping.Compile(cols)
	if err != nil {
		return nil, fmt.Errorf("postgres: connector %q: columns: %w", info.Connector, err)
	}
	parts, _ := splitTable(c.Table)
	s := &Sink{
		cfg:    c,
		info:   info,
		log:    info.Logger,
		mapper: mapper,
		upsert: c.Mode == ModeUpsert,
		target: pgx.Identifier(parts),
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s.copyCols = cols.Names()
	for i, col := range cols {
		switch col.Type.Kind {
		case mapping.KindString:
			s.nulCheck = append(s.nulCheck, i)
		case mapping.KindJSON:
			s.jsonCheck = append(s.jsonCheck, i)
		}
	}
	if s.upsert {
		// The partition is the same for every row of a flush: the merge
		// takes it as a parameter rather than from each staged row.
		s.copyCols = append(s.copyCols, seqColumn)
		for _, k := range c.Key {
			s.keyIdx = append(s.keyIdx, cols.Index(k))
		}
		s.sqlUpsert = upsertSQL(s.target, s.copyCols, c.Key)
	}
	s.copyTable = s.target
	if s.upsert {
		s.copyTable = pgx.Identifier{stageTableName}
	}
	s.sqlCopy = copySQL(s.copyTable, s.copyCols)
	s.sqlDescribeCopy = describeSQL(s.copyTable, s.copyCols)
	s.watermarks = qualify(s.target, watermarkTableName)
	s.deadLetters = qualify(s.target, deadLetterTableName)
	s.sqlReadWM = readWatermarkSQL(s.watermarks)
	s.sqlInsertWM = insertWatermarkSQL(s.watermarks)
	s.sqlAdvanceWM = advanceWatermarkSQL(s.watermarks)

	pc, err := pgxpool.ParseConfig(c.DSN.Reveal())
	if err != nil {
		return nil, fmt.Errorf("postgres: connector %q: dsn: not a valid connection string", info.Connector)
	}
	cc := pc.ConnConfig
	stage := createStageSQL(s.target, s.copyCols)
	setup := func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn)
		if !s.upsert {
			return nil
		}
		_, err := conn.Exec(ctx, stage)
		return err
	}
	// The schema is prepared on a connection of its own first: the pool's
	// setup hook needs the target table to exist.
	if err := s.prepare(ctx, cc.Copy()); err != nil {
		return nil, err
	}
	pc.MaxConns = int32(c.PoolSize)
	pc.AfterConnect = setup
	if s.pool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return nil, fmt.Errorf("postgres: connector %q: pool: %w", info.Connector, classify(err))
	}
	return s, nil
}

// prepare creates the state tables, creates or checks the target table,
// and, for upserts, checks that the key has a unique index.
func (s *Sink) prepare(ctx context.Context, cc *pgx.ConnConfig) error {
	errf := func(format string, args ...any) error {
		return fmt.Errorf("postgres: connector %q table %s: "+format, append([]any{s.info.Connector, s.cfg.Table}, args...)...)
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
	// Replicas starting together would race on CREATE TABLE IF NOT EXISTS
	// (a unique violation in pg_type): serialise the DDL.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('ehsink schema'))`); err != nil {
		return errf("lock: %w", classify(err))
	}
	for _, ddl := range []string{watermarkDDL(s.watermarks), deadLetterDDL(s.deadLetters)} {
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return errf("create state table: %w", classify(err))
		}
	}
	var exists bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.target.Sanitize()).Scan(&exists); err != nil {
		return errf("%w", classify(err))
	}
	if !exists {
		if !s.cfg.CreateTable {
			return errf("table does not exist (create it, or set create_table: true to derive it from the columns)")
		}
		if _, err := tx.Exec(ctx, createTableSQL(s.target, s.mapper.Columns(), s.cfg.Key, s.upsert)); err != nil {
			return errf("create table: %w", classify(err))
		}
		s.log.Info("created table", "table", s.cfg.Table)
	}
	if err := s.checkColumns(ctx, tx); err != nil {
		return errf("%w", err)
	}
	if s.upsert {
		// Running the merge on the empty staging table makes the server
		// check the ON CONFLICT target, and changes nothing.
		if _, err := tx.Exec(ctx, createStageSQL(s.target, s.copyCols)); err != nil {
			return errf("staging table: %w", classify(err))
		}
		if _, err := tx.Exec(ctx, s.sqlUpsert, ""); err != nil {
			return errf("key (%s) must be the primary key or have a unique index: %w", strings.Join(s.cfg.Key, ", "), classify(err))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return errf("%w", classify(err))
	}
	return nil
}

// checkColumns compares the table's columns with the mapping.
func (s *Sink) checkColumns(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, columnsSQL, s.target.Sanitize())
	if err != nil {
		return classify(err)
	}
	type column struct {
		typ, written string
		typmod       int32
	}
	types := map[string]string{}
	table := map[string]column{}
	for rows.Next() {
		var name string
		var c column
		if err := rows.Scan(&name, &c.typ, &c.typmod, &c.written); err != nil {
			return err
		}
		types[name], table[name] = c.typ, c
	}
	if err := rows.Err(); err != nil {
		return classify(err)
	}
	var errs []error
	s.charLimits = s.charLimits[:0]
	for i, col := range s.mapper.Columns() {
		typ, ok := types[col.Name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("column %q: not in the table", col.Name))
		case !slices.Contains(compatible(col.Type.Kind), typ):
			errs = append(errs, fmt.Errorf("column %q: the table has %s, the mapping says %s (want one of %s)", col.Name, typ, col.Type, strings.Join(compatible(col.Type.Kind), ", ")))
		}
		// Limits the table sets are checked per event (a value that breaks
		// one is that event's error, not a failed COPY of the whole batch).
		c := table[col.Name]
		if n := charLimit(c.typ, c.typmod); n > 0 && col.Type.Kind == mapping.KindString {
			s.charLimits = append(s.charLimits, charLimitCol{index: i, max: n})
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
				s.target.Sanitize(), quote(partitionColumn), quote(seqColumn)))
		}
	}
	return errors.Join(errs...)
}

// Open reads the partition's watermark and returns a writer for it.
func (s *Sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	wm, err := s.readWatermark(ctx, partition)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: connector %q partition %s: read watermark: %w", s.info.Connector, partition, err)
	}
	w := &writer{s: s, partition: partition, wm: wm, width: len(s.copyCols)}
	return w, clonePos(wm), nil
}

func (s *Sink) wmKey(partition string) []any {
	return []any{s.info.Connector, s.info.Namespace, s.info.EventHub, s.info.ConsumerGroup, s.cfg.Table, partition}
}

func (s *Sink) readWatermark(ctx context.Context, partition string) (*sinks.Position, error) {
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
func (s *Sink) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		if s.pool != nil {
			s.pool.Close()
		}
	})
	return nil
}

func (s *Sink) fault(point string) error {
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
