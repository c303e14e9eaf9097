package postgres

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/mapping"
	"github.com/ehsink/ehsink/secret"
	"github.com/ehsink/ehsink/sinks"
)

// Modes of writing.
const (
	// ModeAppend inserts every event as a new row.
	ModeAppend = "append"
	// ModeUpsert keeps one row per key, holding the newest event's values.
	ModeUpsert = "upsert"
)

// Hidden columns of an upsert table: the partition and sequence number of
// the event that wrote the row, for the ordering guard.
const (
	partitionColumn = "_ehsink_partition"
	seqColumn       = "_ehsink_seq"
	reservedPrefix  = "_ehsink_"
)

// DefaultPoolSize is the pool size when Config.PoolSize is zero.
const DefaultPoolSize = 4

// Config is the `sink:` block of a postgres connector. NewConfig sets the
// defaults; a hand-built Config is valid once Validate passes.
type Config struct {
	// DSN is the connection string, as a URL (postgres://user:pw@host/db?sslmode=require)
	// or in keyword form (host=... dbname=... sslmode=...). Required.
	DSN secret.String `yaml:"dsn"`
	// Table is the target table, optionally schema-qualified (schema.table).
	// Required. The state tables live in the same schema.
	Table string `yaml:"table"`
	// Mode is append or upsert. If empty, append.
	Mode string `yaml:"mode"`
	// Key lists the upsert key columns (the table's primary key or a unique
	// index over exactly them). Required for upsert, not allowed for append.
	Key []string `yaml:"key"`
	// Columns maps event values to table columns. Required.
	Columns mapping.Columns `yaml:"columns"`
	// CreateTable creates the target table from the mapping when it does
	// not exist. If false (the default), a missing table is an error.
	CreateTable bool `yaml:"create_table"`
	// PoolSize is the most connections the sink opens. If zero, 4.
	PoolSize int `yaml:"pool_size"`
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeAppend
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	return c
}

// Validate reports every problem of c as a [*sinks.FieldError], joined.
func (c *Config) Validate() error {
	d := c.withDefaults()
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	if d.DSN == "" {
		fe("dsn", errors.New("required"))
	} else if _, err := pgx.ParseConfig(d.DSN.Reveal()); err != nil {
		// pgconn's parse errors are best-effort redacted and may echo the
		// password of a malformed string: say what is expected instead.
		fe("dsn", errors.New("not a valid PostgreSQL connection string (want postgres://user:password@host:port/db?sslmode=... or host=... dbname=... keywords)"))
	}
	if _, err := splitTable(d.Table); err != nil {
		fe("table", err)
	}
	switch d.Mode {
	case ModeAppend:
		if len(d.Key) > 0 {
			fe("key", errors.New("only used with mode: upsert"))
		}
	case ModeUpsert:
		if len(d.Key) == 0 {
			fe("key", errors.New("required with mode: upsert"))
		}
		for i, k := range d.Key {
			if d.Columns.Index(k) < 0 {
				fe(fmt.Sprintf("key[%d]", i), fmt.Errorf("%q is not a mapped column (columns: %s)", k, strings.Join(d.Columns.Names(), ", ")))
			}
			if slices.Index(d.Key, k) != i {
				fe(fmt.Sprintf("key[%d]", i), fmt.Errorf("%q is listed twice", k))
			}
		}
	default:
		fe("mode", fmt.Errorf("%q: want append or upsert", d.Mode))
	}
	if err := d.Columns.Validate(); err != nil {
		for _, e := range flatten(err) {
			var f *sinks.FieldError
			if errors.As(e, &f) {
				fe("columns."+f.Field, f.Err)
			} else {
				fe("columns", e)
			}
		}
	}
	for _, col := range d.Columns {
		if strings.HasPrefix(col.Name, reservedPrefix) {
			fe("columns."+col.Name, fmt.Errorf("names starting with %s are reserved for the sink", reservedPrefix))
		}
	}
	if d.PoolSize < 0 {
		fe("pool_size", errors.New("must not be negative"))
	}
	return errors.Join(errs...)
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
