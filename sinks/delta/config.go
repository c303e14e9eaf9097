package delta

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/parquetfile"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	tableshape "github.com/ehsink/ehsink/sinks/table"
)

// sinkConfig is the `sink:` block of a connector with `type: delta`.
// Table and Columns are required. [newConfig] returns one with every
// default set; a decoded config starts from it.
type sinkConfig struct {
	// Table is the table's folder: a local directory, or with Blob the
	// folder in the container. Required unless Routes are given.
	Table string `yaml:"table"`
	// Blob, when set, puts the table in an Azure Blob (or ADLS Gen2)
	// container.
	Blob *blobConfig `yaml:"blob"`
	// Columns maps event values to the table's columns, in the mapping
	// language shared with the Parquet, Iceberg and PostgreSQL sinks.
	// Required unless Routes are given.
	Columns mapping.Columns `yaml:"columns"`
	// Explode, when set, makes one row per element of the array at this
	// JSON path (see [mapping.Options]).
	Explode mapping.Path `yaml:"explode,omitempty"`
	// PartitionBy are the partition columns of a table the sink creates,
	// in order: columns of the mapping, not nullable, of type string,
	// int32, int64 or boolean; or day(COLUMN) of a timestamp column (not
	// nullable), a Delta date column COLUMN_date holding its UTC day. An
	// existing table must have the same.
	PartitionBy []string `yaml:"partition_by,omitempty"`
	// Routes send each event to the table of the first route whose
	// condition holds; they replace Table, Columns, Explode and
	// PartitionBy. Every table has its own commits and its own txn of
	// each partition, and each flush commits a txn to every table, so
	// that a partition resumes from the lowest of them and each table
	// skips what it holds.
	Routes []routeConfig `yaml:"routes,omitempty"`
	// DeadLetterTable is the folder of the table that the events the sink
	// cannot write go to (created if missing), committed before the data
	// of the same flush. If empty, Table + "_dead_letters", or with
	// Routes the folder dead_letters beside the first route's table.
	DeadLetterTable string `yaml:"dead_letter_table"`
	// CreateTable creates the table when its folder holds no Delta log.
	// If false, a missing table is an error. Default true.
	CreateTable bool `yaml:"create_table"`
	// Evolve adds to an existing table, at start, the mapped columns its
	// schema lacks: nullable fields, in a commit of its own holding the
	// widened metaData, before any row that carries them. A column is never
	// dropped or its type changed. If unset, CreateTable's value; if
	// false, a mapped column the table lacks is an error.
	Evolve *bool `yaml:"evolve,omitempty"`
	// Properties are the configuration of a table the sink creates
	// (delta.* table properties).
	Properties map[string]string `yaml:"properties,omitempty"`
	// Compression is the data files' codec: zstd or snappy. If empty,
	// zstd.
	Compression string `yaml:"compression"`
	// CheckpointInterval is how many commits apart the sink writes a
	// checkpoint of the log. If zero, 10 (Delta's own default).
	CheckpointInterval int `yaml:"checkpoint_interval"`
	// OrphanAge is how old a data file of this connector that no commit
	// took must be before the sink removes it when it starts; younger
	// ones may belong to a commit in flight. If zero, 1h.
	OrphanAge time.Duration `yaml:"orphan_age"`
	// MaxRows commits the rows gathered for a partition once there are at
	// least this many. If zero, 500,000.
	MaxRows int64 `yaml:"max_rows"`
	// MaxBytes commits once the gathered rows' estimated size reaches
	// this. The data files are built in memory until the commit, so
	// memory is about max_bytes per partition. If zero, 64MiB.
	MaxBytes config.ByteSize `yaml:"max_bytes"`
	// MaxAge commits this long after the first event of a commit was
	// taken, so that a quiet partition still commits and checkpoints. If
	// zero, 1m.
	MaxAge time.Duration `yaml:"max_age"`

	// letters says this is the config of a dead-letter table's sink,
	// which has no dead-letter table of its own.
	letters bool
	// routed says this is the config of one route's table: the routed
	// sink above it holds the dead-letter table.
	routed bool
}

// routeConfig is one entry of a delta sink's `routes:` list.
type routeConfig struct {
	// Name names the route in errors, logs and the tests of `ehsink test`.
	// If empty, its table as written.
	Name string `yaml:"name"`
	// When is the condition an event must meet to take this route (package
	// expr). Empty: every event no earlier route took (the default route).
	When string `yaml:"when"`
	// Table is the route's table folder, under the same storage as the
	// sink's (a local directory, or a folder of the Blob container).
	// Required.
	Table string `yaml:"table"`
	// Columns maps event values to the route's table. Required.
	Columns mapping.Columns `yaml:"columns"`
	// Explode makes one row per element of an array, as sinkConfig.Explode.
	Explode mapping.Path `yaml:"explode,omitempty"`
	// PartitionBy are the partition columns of the route's table, as
	// sinkConfig.PartitionBy.
	PartitionBy []string `yaml:"partition_by,omitempty"`
}

// routes returns c's routes: its Routes, or the one route of a sink
// without them.
func (c *sinkConfig) routes() []routeConfig {
	if len(c.Routes) > 0 {
		return c.Routes
	}
	return []routeConfig{{Table: c.Table, Columns: c.Columns, Explode: c.Explode, PartitionBy: c.PartitionBy}}
}

// routeName is route r's name in reports: its name, or its table.
func routeName(r routeConfig) string {
	if r.Name != "" {
		return r.Name
	}
	return r.Table
}

// deadLetterTable is the dead-letter table's folder. Its default depends
// on Table or Routes, so withDefaults does not set it (a decoded config
// starts from newConfig's defaults).
func (c *sinkConfig) deadLetterTable() string {
	switch {
	case c.DeadLetterTable != "":
		return c.DeadLetterTable
	case len(c.Routes) > 0:
		return path.Join(path.Dir(strings.TrimRight(c.Routes[0].Table, "/")), "dead_letters")
	}
	return strings.TrimRight(c.Table, "/") + "_dead_letters"
}

// blobConfig says which Blob container holds the table, reached with a
// connection string or with an account URL and Entra ID.
type blobConfig struct {
	// Connection is a storage connection string. Required unless
	// AccountURL is set.
	Connection secret.String `yaml:"connection"`
	// AccountURL is the account's Blob endpoint,
	// https://ACCOUNT.blob.core.windows.net, reached with Entra ID
	// (azidentity.DefaultAzureCredential: a managed identity, workload
	// identity, environment or Azure CLI login), instead of Connection.
	AccountURL string `yaml:"account_url"`
	// Container holds the table; it must exist. Required.
	Container string `yaml:"container"`
}

// Defaults, applied by withDefaults.
const (
	defaultMaxRows            = 500_000
	defaultMaxBytes           = 64 * config.MiB
	defaultMaxAge             = time.Minute
	defaultCheckpointInterval = 10
	defaultOrphanAge          = time.Hour
)

func newConfig() *sinkConfig {
	c := &sinkConfig{CreateTable: true}
	c.withDefaults()
	return c
}

// evolves reports whether the sink adds the mapped columns a table lacks.
// It is not a default withDefaults sets: newConfig applies those before
// the YAML is decoded, and an unset evolve follows create_table as
// decoded.
func (c *sinkConfig) evolves() bool {
	if c.Evolve != nil {
		return *c.Evolve
	}
	return c.CreateTable
}

func (c *sinkConfig) withDefaults() {
	if c.Compression == "" {
		c.Compression = "zstd"
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = defaultCheckpointInterval
	}
	if c.OrphanAge == 0 {
		c.OrphanAge = defaultOrphanAge
	}
	if c.MaxRows == 0 {
		c.MaxRows = defaultMaxRows
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = defaultMaxBytes
	}
	if c.MaxAge == 0 {
		c.MaxAge = defaultMaxAge
	}
}

// Validate reports every problem of the config as a [*sinks.FieldError]
// (paths relative to the sink block), joined with errors.Join.
func (c *sinkConfig) Validate() error {
	cc := *c
	cc.withDefaults()
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	routed := len(cc.Routes) > 0
	if routed {
		for field, set := range map[string]bool{"table": cc.Table != "", "columns": len(cc.Columns) > 0,
			"explode": cc.Explode.IsSet(), "partition_by": len(cc.PartitionBy) > 0} {
			if set {
				fe(field, errors.New("set per route when routes are given"))
			}
		}
	}
	var whens routing.WhenChecker
	tables := map[string]int{}
	for i, r := range cc.routes() {
		prefix := ""
		if routed {
			prefix = fmt.Sprintf("routes[%d].", i)
			if err := whens.Check(i, r.When); err != nil {
				fe(prefix+"when", err)
			}
		}
		j, dup := tables[path.Clean(r.Table)]
		switch {
		case r.Table == "":
			fe(prefix+"table", errors.New("required (a directory, or with blob the folder in the container)"))
		case cc.Blob != nil && (strings.Contains(r.Table, "..") || path.IsAbs(r.Table) && strings.Trim(r.Table, "/") == ""):
			fe(prefix+"table", errors.New("want a folder of the container"))
		case dup:
			fe(prefix+"table", fmt.Errorf("routes[%d] has the same table", j))
		default:
			tables[path.Clean(r.Table)] = i
		}
		errs = append(errs, validateTable(prefix, r)...)
	}
	if j, dup := tables[path.Clean(cc.deadLetterTable())]; dup && (routed || cc.DeadLetterTable != "") {
		if routed {
			fe("dead_letter_table", fmt.Errorf("routes[%d] has the same table", j))
		} else {
			fe("dead_letter_table", errors.New("is the table"))
		}
	}
	if cc.Blob != nil {
		if field, err := connstr.Blob(cc.Blob.Connection.Reveal(), cc.Blob.AccountURL); err != nil {
			fe("blob."+field, err)
		}
		if cc.Blob.Container == "" {
			fe("blob.container", errors.New("required"))
		}
	}
	switch cc.Compression {
	case "zstd", "snappy":
	default:
		fe("compression", fmt.Errorf("unknown compression %q (want zstd or snappy)", cc.Compression))
	}
	for field, neg := range map[string]bool{"max_rows": cc.MaxRows < 0, "max_bytes": cc.MaxBytes < 0,
		"max_age": cc.MaxAge < 0, "checkpoint_interval": cc.CheckpointInterval < 0, "orphan_age": cc.OrphanAge < 0} {
		if neg {
			fe(field, errors.New("must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// validateTable reports the problems of one table's columns and
// partition_by, with field paths under prefix ("routes[1]." or "").
func validateTable(prefix string, r routeConfig) []error {
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: prefix + field, Err: err}) }
	if err := errors.Join(r.Columns.Validate(), mapping.Options{Explode: r.Explode}.Validate(r.Columns)); err != nil {
		fe("columns", err)
	} else {
		for _, col := range r.Columns {
			if _, err := deltaType(col.Type); err != nil {
				fe("columns."+col.Name+".type", err)
			}
		}
	}
	seen := map[string]bool{}
	identity := 0
	for i, p := range r.PartitionBy {
		field := fmt.Sprintf("partition_by[%d]", i)
		ps, err := parsePartition(p, r.Columns)
		switch {
		case err != nil:
			fe(field, err)
		case seen[ps.name]:
			fe(field, fmt.Errorf("%q is listed twice", ps.name))
		case ps.day && r.Columns.Index(ps.name) >= 0:
			fe(field, fmt.Errorf("%s is also a column of the mapping", ps.name))
		case !ps.day:
			identity++
		}
		if err == nil {
			seen[ps.name] = true
		}
	}
	if identity > 0 && identity == len(r.Columns) {
		fe("partition_by", errors.New("every column is a partition column; a data file needs one that is not"))
	}
	return errs
}

// partitionSpec is one entry of partition_by.
type partitionSpec struct {
	name string // the partition column's name in the table
	col  int    // the mapping column it comes from
	day  bool   // day(col): the UTC date of a timestamp, a Delta date
}

// parsePartition parses a partition_by entry: a column of cols, or
// day(COLUMN) of a timestamp column.
func parsePartition(p string, cols mapping.Columns) (partitionSpec, error) {
	if inner, ok := strings.CutPrefix(p, "day("); ok && strings.HasSuffix(inner, ")") {
		name := strings.TrimSuffix(inner, ")")
		j := cols.Index(name)
		switch {
		case j < 0:
			return partitionSpec{}, fmt.Errorf("%q is not one of the columns", name)
		case cols[j].Type.Kind != mapping.KindTimestamp:
			return partitionSpec{}, fmt.Errorf("day() takes a timestamp column; %q is %s", name, cols[j].Type)
		case cols[j].Nullable:
			return partitionSpec{}, fmt.Errorf("column %q is nullable; a partition column is not", name)
		}
		return partitionSpec{name: name + "_date", col: j, day: true}, nil
	}
	j := cols.Index(p)
	switch {
	case j < 0:
		return partitionSpec{}, fmt.Errorf("%q is not one of the columns (or day(COLUMN))", p)
	case cols[j].Nullable:
		return partitionSpec{}, fmt.Errorf("column %q is nullable; a partition column is not", p)
	}
	switch cols[j].Type.Kind {
	case mapping.KindString, mapping.KindInt32, mapping.KindInt64, mapping.KindBoolean:
		return partitionSpec{name: p, col: j}, nil
	}
	return partitionSpec{}, fmt.Errorf("column %q is %s; a partition column is string, int32, int64 or boolean (or day() of a timestamp)", p, cols[j].Type)
}

// deltaType is the Delta schema type of a column type. A timestamp is
// Delta's timestamp (an instant, UTC); Delta has no UUID type.
func deltaType(t mapping.Type) (string, error) {
	switch t.Kind {
	case mapping.KindString, mapping.KindJSON:
		return "string", nil
	case mapping.KindInt32:
		return "integer", nil
	case mapping.KindInt64:
		return "long", nil
	case mapping.KindDouble:
		return "double", nil
	case mapping.KindBoolean:
		return "boolean", nil
	case mapping.KindTimestamp:
		return "timestamp", nil
	case mapping.KindBytes:
		return "binary", nil
	case mapping.KindDecimal:
		if _, err := parquetfile.LeafNode(t); err != nil {
			return "", err
		}
		return fmt.Sprintf("decimal(%d,%d)", t.Precision, t.Scale), nil
	case mapping.KindUUID:
		return "", errors.New("a Delta table has no uuid type; map the column as string")
	}
	return "", fmt.Errorf("type %s has no Delta type", t)
}

// String describes the destination, never a secret.
func (c *sinkConfig) String() string {
	var names []string
	for _, r := range c.routes() {
		names = append(names, r.Table)
	}
	s := "delta table " + names[0]
	if len(names) > 1 {
		s = "delta tables " + strings.Join(names, ", ")
	}
	if c.Blob != nil {
		s += " in blob container " + c.Blob.Container
	}
	return s
}

// TableShape returns the sink's routes, for `ehsink test` and for the
// sink itself, which maps events with each route's Mapper and Check: one
// code path.
func (c *sinkConfig) TableShape() (tableshape.Shape, error) {
	sh := tableshape.Shape{Routed: len(c.Routes) > 0}
	for i, r := range c.routes() {
		rm, err := parquetfile.NewRowMapper(r.Columns, r.Explode)
		if err != nil {
			if sh.Routed {
				return tableshape.Shape{}, fmt.Errorf("routes[%d].columns: %w", i, err)
			}
			return tableshape.Shape{}, fmt.Errorf("columns: %w", err)
		}
		sh.Routes = append(sh.Routes, tableshape.Route{Name: routeName(r), When: r.When, Dest: r.Table, DestIsTable: true,
			Columns: r.Columns, Explode: r.Explode, Mapper: rm.Mapper(), Check: rm.Check})
	}
	return sh, nil
}
