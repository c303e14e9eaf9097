package postgres

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/cdc"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// Modes of writing.
const (
	// modeAppend inserts every event as a new row.
	modeAppend = "append"
	// modeUpsert keeps one row per key, holding the newest event's values.
	modeUpsert = "upsert"
)

// Hidden columns of an upsert table: the partition and sequence number of
// the event that wrote the row, for the ordering guard.
const (
	partitionColumn = "_ehsink_partition"
	seqColumn       = "_ehsink_seq"
	reservedPrefix  = "_ehsink_"
)

// defaultPoolSize is the pool size when Config.PoolSize is zero.
const defaultPoolSize = 4

// sinkConfig is the `sink:` block of a postgres connector. NewConfig sets the
// defaults; a hand-built sinkConfig is valid once Validate passes.
type sinkConfig struct {
	// DSN is the connection string, as a URL (postgres://user:pw@host/db?sslmode=require)
	// or in keyword form (host=... dbname=... sslmode=...). Required.
	DSN secret.String `yaml:"dsn"`
	// Table is the target table, optionally schema-qualified (schema.table).
	// Required unless Routes are set. The state tables live in the same
	// schema.
	Table string `yaml:"table"`
	// Mode is append or upsert. If empty, append.
	Mode string `yaml:"mode"`
	// Key lists the upsert key columns (the table's primary key or a unique
	// index over exactly them). Required for upsert, not allowed for append.
	Key []string `yaml:"key"`
	// Columns maps event values to table columns. Required unless Routes
	// are set.
	Columns mapping.Columns `yaml:"columns"`
	// Explode, when set, makes one row per element of the array at this
	// JSON path (such as $.records): the element is the `$` of the columns,
	// and @index its position (see [mapping.Options]). With routes, set it
	// per route.
	Explode mapping.Path `yaml:"explode,omitempty"`
	// Routes send each event to the table of the first route whose
	// condition holds (see [Route]). With routes, Table, Key and Columns
	// are set per route, and the state tables live in the schema of the
	// connection's search_path.
	Routes []routeConfig `yaml:"routes,omitempty"`
	// CreateTable creates the target table from the mapping when it does
	// not exist. If false (the default), a missing table is an error.
	CreateTable bool `yaml:"create_table"`
	// Evolve adds to an existing table, at start, the mapped columns it
	// lacks: nullable, with the type create_table would give them. A
	// column is never dropped or its type changed. If unset, it follows
	// CreateTable; without it, a mapped column the table lacks is an error
	// that gives the ALTER TABLE statement to run.
	Evolve *bool `yaml:"evolve,omitempty"`
	// PoolSize is the most connections the sink opens. If zero, 4.
	PoolSize int `yaml:"pool_size"`
	// Format is what an event body is: json (the row the columns read) or
	// debezium (a Debezium change event: the columns read its after image,
	// op d deletes). If empty, json.
	Format cdc.Format `yaml:"format"`
	// Delete names the condition that makes an event delete its key, and
	// where a delete finds the key's values. Upsert only.
	Delete *cdc.Delete `yaml:"delete"`
	// TombstoneRetention is how long the sink keeps the tombstone of a
	// deleted key, which stops an older event of the key from bringing the
	// row back. Keep it at least the event hub's retention. If zero, 168h
	// (the longest retention of the Standard tier).
	TombstoneRetention time.Duration `yaml:"tombstone_retention"`
	// StatementTimeout is the sink sessions' statement_timeout: the server
	// cancels a statement that runs longer (SQLSTATE 57014, retried). If
	// zero, 10s; -1s turns it off (the server's own setting applies).
	StatementTimeout time.Duration `yaml:"statement_timeout"`
	// IdleInTransactionTimeout is the sink sessions'
	// idle_in_transaction_session_timeout: the server ends a session that
	// sits in an open transaction for longer, rolling it back and freeing
	// its locks. A flush sends its statements back to back, so only a
	// client that stopped answering (a half-open connection, a crashed
	// process) reaches it; without it, the orphaned transaction holds the
	// watermark row's lock, and so the partition's next owner, until the
	// server's TCP notices the dead client (two hours by default). If zero,
	// 10s; -1s turns it off.
	//
	// Both are sent as startup parameters. A pooler that refuses unknown
	// ones (PgBouncer without ignore_startup_parameters) refuses the
	// connection: set both to -1s there, and the values on the role
	// (ALTER ROLE ... SET) instead.
	IdleInTransactionTimeout time.Duration `yaml:"idle_in_transaction_timeout"`
}

// Defaults of the server-side timeouts (Config.StatementTimeout and
// Config.IdleInTransactionTimeout).
const (
	defaultStatementTimeout         = 10 * time.Second
	defaultIdleInTransactionTimeout = 10 * time.Second
)

// defaultTombstoneRetention is the tombstone retention when
// Config.TombstoneRetention is zero.
const defaultTombstoneRetention = 7 * 24 * time.Hour

// routeConfig is one entry of a postgres sink's `routes:` list.
type routeConfig struct {
	// Name names the route in errors, logs and the tests of `ehsink test`.
	// If empty, the route's table as written.
	Name string `yaml:"name"`
	// When is the condition an event must meet to take this route, in the
	// language of package expr. Empty: every event that no earlier route
	// took (the default route; routes after it are never reached).
	When string `yaml:"when"`
	// Table is the route's table, optionally schema-qualified. It may take
	// values of the event in placeholders: `events_{$.type}` (see
	// [expr.Template]); the rendered name must then be an identifier
	// (letters, digits and _, at most 63 bytes per part), and the table
	// must exist or create_table be set, else the event is a dead letter.
	// Required.
	Table string `yaml:"table"`
	// Key lists the route's upsert key columns. Required with mode:
	// upsert, not allowed with append.
	Key []string `yaml:"key"`
	// Columns maps event values to the route's table columns. Required.
	Columns mapping.Columns `yaml:"columns"`
	// Explode makes one row per element of an array, as Config.Explode.
	Explode mapping.Path `yaml:"explode,omitempty"`
	// MaxTables bounds how many tables a templated Table may name; an
	// event that would name one more is a dead letter. If zero, 100.
	MaxTables int `yaml:"max_tables"`
}

// defaultMaxTables is the bound of a templated route's tables when
// Route.MaxTables is zero.
const defaultMaxTables = 100

// routesTableName is the table_name of a routed connector's watermark
// and dead-letter rows: one watermark covers all the routes' tables.
const routesTableName = "*"

// Destination says where the sink writes, for the connector's start line:
// the table (or the routes' tables) and the server, without credentials.
func (c *sinkConfig) Destination() string {
	var tables []string
	for _, r := range c.routes() {
		tables = append(tables, r.Table)
	}
	where := "PostgreSQL table " + strings.Join(tables, ", ")
	if pc, err := connstr.Postgres(c.DSN.Reveal()); err == nil {
		where += fmt.Sprintf(" on %s:%d/%s", pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Database)
	}
	return where
}

// EventFormat returns the format of the events (json or debezium), so that
// the runner's filter lets Debezium tombstones through to the sink, which
// skips them.
func (c *sinkConfig) EventFormat() cdc.Format { return c.Format }

// routes returns c's routes: its Routes, or the one route of a connector
// without them.
func (c *sinkConfig) routes() []routeConfig {
	if len(c.Routes) > 0 {
		return c.Routes
	}
	return []routeConfig{{Table: c.Table, Key: c.Key, Columns: c.Columns, Explode: c.Explode}}
}

// routeName names route rc in errors and reports: its name, or its table
// as written.
func routeName(rc routeConfig) string { return cmp.Or(rc.Name, rc.Table) }

// withDefaults returns c with zero fields set to their defaults.
func (c sinkConfig) withDefaults() sinkConfig {
	if c.Mode == "" {
		c.Mode = modeAppend
	}
	if c.PoolSize == 0 {
		c.PoolSize = defaultPoolSize
	}
	if c.Format == "" {
		c.Format = cdc.FormatJSON
	}
	if c.TombstoneRetention == 0 {
		c.TombstoneRetention = defaultTombstoneRetention
	}
	if c.StatementTimeout == 0 {
		c.StatementTimeout = defaultStatementTimeout
	}
	if c.IdleInTransactionTimeout == 0 {
		c.IdleInTransactionTimeout = defaultIdleInTransactionTimeout
	}
	if c.Evolve == nil {
		// A sink trusted to create the table is trusted to widen it.
		evolve := c.CreateTable
		c.Evolve = &evolve
	}
	return c
}

// Validate reports every problem of c as a [*sinks.FieldError], joined.
func (c *sinkConfig) Validate() error {
	d := c.withDefaults()
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	if d.DSN == "" {
		fe("dsn", errors.New("required"))
	} else if _, err := connstr.Postgres(d.DSN.Reveal()); err != nil {
		fe("dsn", err)
	}
	routed := len(d.Routes) > 0
	if routed {
		for _, f := range []struct {
			name string
			set  bool
		}{{"table", d.Table != ""}, {"key", len(d.Key) > 0}, {"columns", len(d.Columns) > 0}, {"explode", d.Explode.IsSet()}} {
			if f.set {
				fe(f.name, errors.New("set per route when routes are given"))
			}
		}
	}
	switch d.Mode {
	case modeAppend, modeUpsert:
	default:
		fe("mode", fmt.Errorf("%q: want append or upsert", d.Mode))
	}
	var whens routing.WhenChecker
	for i, r := range d.routes() {
		prefix := ""
		if routed {
			prefix = fmt.Sprintf("routes[%d].", i)
			if err := whens.Check(i, r.When); err != nil {
				fe(prefix+"when", err)
			}
			if r.MaxTables < 0 {
				fe(prefix+"max_tables", errors.New("must not be negative"))
			}
		}
		validateRoute(d.Mode, r, func(field string, err error) { fe(prefix+field, err) })
	}
	if shape, err := d.TableShape(); err == nil && routed {
		if err := shape.Validate(); err != nil {
			fe("routes", err)
		}
	}
	if d.PoolSize < 0 {
		fe("pool_size", errors.New("must not be negative"))
	}
	if d.TombstoneRetention < 0 {
		fe("tombstone_retention", errors.New("must not be negative"))
	}
	for _, t := range []struct {
		field string
		d     time.Duration
	}{{"statement_timeout", d.StatementTimeout}, {"idle_in_transaction_timeout", d.IdleInTransactionTimeout}} {
		switch {
		case t.d < 0 && t.d != -time.Second:
			fe(t.field, fmt.Errorf("%s: want a positive duration, or -1s for the server's setting", t.d))
		case t.d > 0 && t.d < time.Millisecond:
			fe(t.field, fmt.Errorf("%s: below the server's resolution of 1ms", t.d))
		}
	}
	d.validateDeletes(fe)
	return errors.Join(errs...)
}

// changeSpec is what package cdc needs of the config for route r.
func (c *sinkConfig) changeSpec(r routeConfig) cdc.Spec {
	cs := cdc.Spec{Format: c.Format, Delete: c.Delete, Columns: r.Columns, Key: r.Key}
	if c.Delete != nil && len(c.Routes) > 0 {
		// delete.key is shared: each route takes the entries of its key.
		d := *c.Delete
		d.Key = map[string]string{}
		for k, v := range c.Delete.Key {
			if slices.Contains(r.Key, k) {
				d.Key[k] = v
			}
		}
		cs.Delete = &d
	}
	return cs
}

// compileMapping compiles what route rc makes of an event: its column
// mapping (the key columns not nullable: a row without its key cannot be
// written), and its rules when the connector deletes (nil otherwise). The
// running sink (compileRoute) and `ehsink test` (TableShape) map events
// with what it returns.
func (c *sinkConfig) compileMapping(rc routeConfig) (*mapping.Mapper, *cdc.Rules, error) {
	cols := slices.Clone(rc.Columns)
	for i := range cols {
		if slices.Contains(rc.Key, cols[i].Name) {
			cols[i].Nullable = false
		}
	}
	mapper, err := mapping.CompileWith(cols, mapping.Options{Explode: rc.Explode})
	if err != nil {
		return nil, nil, fmt.Errorf("columns: %w", err)
	}
	var rules *cdc.Rules
	if cs := c.changeSpec(rc); cs.Deletes() {
		if rules, err = cdc.Compile(cs); err != nil {
			return nil, nil, err
		}
	}
	return mapper, rules, nil
}

// validateDeletes checks format, delete and, for each route, what its
// key and columns must give a delete. Every route deletes by its own key;
// delete.key names key columns of one route or more.
func (c *sinkConfig) validateDeletes(fe func(string, error)) {
	cs := c.changeSpec(routeConfig{})
	if !cs.Deletes() {
		if err := cs.Validate(); err != nil {
			for _, e := range flatten(err) {
				var f *sinks.FieldError
				if errors.As(e, &f) {
					fe(f.Field, f.Err)
				}
			}
		}
		return
	}
	if c.Mode != modeUpsert {
		what := "delete"
		if c.Format == cdc.FormatDebezium {
			what = "format"
		}
		fe(what, errors.New("deletes need mode: upsert (and the table's key in key)"))
		return
	}
	routed := len(c.Routes) > 0
	keyCols := map[string]bool{}
	for i, r := range c.routes() {
		for _, k := range r.Key {
			keyCols[k] = true
		}
		prefix := ""
		if routed {
			prefix = fmt.Sprintf("routes[%d].", i)
		}
		if r.Explode.IsSet() {
			fe(prefix+"explode", errors.New("does not combine with deletes (format: debezium or a delete block): a delete removes one key"))
		}
		cs := c.changeSpec(r)
		for _, e := range flatten(cs.Validate()) {
			var f *sinks.FieldError
			switch {
			case e == nil:
			case !errors.As(e, &f):
				fe(strings.TrimSuffix(prefix, "."), e)
			case f.Field == "key" && len(r.Key) == 0:
				// validateRoute reported it
			case strings.HasPrefix(f.Field, "delete.") || f.Field == "format":
				if i == 0 || routed && strings.HasPrefix(f.Field, "delete.key.") {
					fe(f.Field, f.Err)
				}
			default:
				fe(prefix+f.Field, f.Err)
			}
		}
	}
	if routed && c.Delete != nil {
		for _, k := range slices.Sorted(maps.Keys(c.Delete.Key)) {
			if !keyCols[k] {
				fe("delete.key."+k, errors.New("not a key column of any route"))
			}
		}
	}
}

// validateRoute checks one route's table, key and columns (the whole
// connector's when it has no routes); fe receives paths relative to it.
func validateRoute(mode string, r routeConfig, fe func(string, error)) {
	if t, err := expr.CompileTemplate(r.Table); err != nil {
		fe("table", err)
	} else if t.Literal() {
		if _, err := splitTable(r.Table); err != nil {
			fe("table", err)
		}
	}
	switch mode {
	case modeAppend:
		if len(r.Key) > 0 {
			fe("key", errors.New("only used with mode: upsert"))
		}
	case modeUpsert:
		if len(r.Key) == 0 {
			fe("key", errors.New("required with mode: upsert"))
		}
		for i, k := range r.Key {
			if r.Columns.Index(k) < 0 {
				fe(fmt.Sprintf("key[%d]", i), fmt.Errorf("%q is not a mapped column (columns: %s)", k, strings.Join(r.Columns.Names(), ", ")))
			}
			if slices.Index(r.Key, k) != i {
				fe(fmt.Sprintf("key[%d]", i), fmt.Errorf("%q is listed twice", k))
			}
		}
	}
	for _, err := range []error{r.Columns.Validate(), mapping.Options{Explode: r.Explode}.Validate(r.Columns)} {
		if err == nil {
			continue
		}
		for _, e := range flatten(err) {
			var f *sinks.FieldError
			if errors.As(e, &f) {
				fe("columns."+f.Field, f.Err)
			} else {
				fe("columns", e)
			}
		}
	}
	for _, col := range r.Columns {
		if strings.HasPrefix(col.Name, reservedPrefix) {
			fe("columns."+col.Name, fmt.Errorf("names starting with %s are reserved for the sink", reservedPrefix))
		}
	}
}

// maxIdentifier is the longest identifier PostgreSQL keeps (NAMEDATALEN-1).
const maxIdentifier = 63

// checkTableName checks a table name rendered from a template: one or two
// parts (schema.table), each letters, digits and _, not starting with a
// digit, at most 63 bytes. Template values are held to that, stricter than
// quoting needs, so that an event cannot name a table a user would not
// write by hand.
func checkTableName(s string) ([]string, error) {
	parts, err := splitTable(s)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if len(p) > maxIdentifier {
			return nil, fmt.Errorf("%q is longer than %d bytes", p, maxIdentifier)
		}
		for i, r := range p {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
				return nil, fmt.Errorf("%q is not an identifier (letters, digits and _, not starting with a digit)", p)
			}
		}
	}
	return parts, nil
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// splitTable splits "schema.table" or "table" into identifier parts.
func splitTable(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("required")
	}
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("%q: want table or schema.table", s)
	}
	for _, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%q: empty name part", s)
		}
	}
	return parts, nil
}
