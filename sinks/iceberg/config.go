package iceberg

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	ice "github.com/apache/iceberg-go"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/expr"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
	tableshape "github.com/ehsink/ehsink/sinks/table"
)

// sinkConfig is the `sink:` block of a connector with `type: iceberg`.
// Catalog, Namespace, Table and Columns are required; Warehouse is
// required with a sql catalog. [newConfig] returns one with every default
// set; a zero sinkConfig gets the same defaults from New.
type sinkConfig struct {
	// Catalog says where the table is registered.
	Catalog catalogConfig `yaml:"catalog"`
	// Namespace holds the table, created if missing; dots separate the
	// levels of a nested namespace (lake.sales).
	Namespace string `yaml:"namespace"`
	// Table is the table's name in Namespace, created if missing with the
	// columns and the partition spec. Required unless Routes are given.
	Table string `yaml:"table"`
	// Warehouse is where the data and metadata files go: a local
	// directory or an Azure Blob container. With a REST catalog it may be
	// left out when the catalog places tables itself.
	Warehouse warehouseConfig `yaml:"warehouse"`
	// Columns maps event values to the table's columns, in the mapping
	// language shared with the Parquet and PostgreSQL sinks. Required
	// unless Routes are given.
	Columns mapping.Columns `yaml:"columns"`
	// Explode, when set, makes one row per element of the array at this
	// JSON path (see [mapping.Options]).
	Explode mapping.Path `yaml:"explode,omitempty"`
	// Partition is the partition spec of a table the sink creates, in
	// order. An existing table keeps its own spec.
	Partition []partitionField `yaml:"partition,omitempty"`
	// Routes send each event to the table of the first route whose
	// condition holds; they replace Table, Columns, Explode and Partition.
	// Each table keeps its own watermark of each partition, and a
	// partition resumes from its checkpoint, each table skipping what it
	// already holds.
	Routes []routeConfig `yaml:"routes,omitempty"`
	// DeadLetterTable is the table in Namespace that the events the sink
	// cannot write go to, committed before the data of the same flush,
	// created if missing. If empty, Table + "_dead_letters", or
	// "dead_letters" with Routes.
	DeadLetterTable string `yaml:"dead_letter_table"`
	// Properties are table properties set when the sink creates a table.
	Properties map[string]string `yaml:"properties,omitempty"`
	// Evolve adds to an existing table, at start, the mapped columns its
	// schema lacks: optional fields with new field IDs, through a schema
	// update committed as the sink's other commits are. A field is never
	// dropped or its type changed. If unset, true (the sink creates its
	// tables); if false, a mapped column the table lacks is an error.
	Evolve *bool `yaml:"evolve,omitempty"`
	// MaxRows commits the rows gathered for a partition once there are at
	// least this many. If zero, 500,000.
	MaxRows int64 `yaml:"max_rows"`
	// MaxBytes commits once the gathered rows' estimated size reaches
	// this. The rows are held in memory until the commit, so memory is
	// about max_bytes per partition. If zero, 64MiB.
	MaxBytes config.ByteSize `yaml:"max_bytes"`
	// MaxAge commits this long after the first event of a commit was
	// taken, so that a quiet partition still commits and checkpoints. If
	// zero, 1m.
	MaxAge time.Duration `yaml:"max_age"`
	// Maintenance expires old snapshots and removes orphan files.
	Maintenance maintenanceConfig `yaml:"maintenance"`
}

// routeConfig is one entry of an iceberg sink's `routes:` list.
type routeConfig struct {
	// Name names the route in errors, logs and the tests of `ehsink test`.
	// If empty, its table as written (namespace.table).
	Name string `yaml:"name"`
	// When is the condition an event must meet to take this route (package
	// expr). Empty: every event no earlier route took (the default route).
	When string `yaml:"when"`
	// Table is the route's table in Namespace, created if missing. It may
	// take values of the event in placeholders: `events_{$.type}` (see
	// [expr.Template]); the rendered name must then be letters, digits
	// and _ (not starting with a digit), at most 128 bytes, else the event
	// is a dead letter. Required.
	Table string `yaml:"table"`
	// Columns maps event values to the route's table. Required.
	Columns mapping.Columns `yaml:"columns"`
	// Explode makes one row per element of an array, as sinkConfig.Explode.
	Explode mapping.Path `yaml:"explode,omitempty"`
	// Partition is the partition spec of the route's table, as
	// sinkConfig.Partition.
	Partition []partitionField `yaml:"partition,omitempty"`
	// MaxTables bounds how many tables a templated Table may name; an
	// event that would name one more is a dead letter. If zero, 100.
	MaxTables int `yaml:"max_tables"`
}

// defaultMaxTables is the bound of a templated route's tables when
// MaxTables is zero.
const defaultMaxTables = 100

// deadLetterTable is the dead-letter table's name: DeadLetterTable, or
// its default, which depends on Table (so it is not set by withDefaults:
// a decoded config starts from newConfig's defaults).
func (c *sinkConfig) deadLetterTable() string {
	switch {
	case c.DeadLetterTable != "":
		return c.DeadLetterTable
	case len(c.Routes) == 0 && c.Table != "":
		return c.Table + "_dead_letters"
	}
	return "dead_letters"
}

// routes returns c's routes: its Routes, or the one route of a sink
// without them.
func (c *sinkConfig) routes() []routeConfig {
	if len(c.Routes) > 0 {
		return c.Routes
	}
	return []routeConfig{{Table: c.Table, Columns: c.Columns, Explode: c.Explode, Partition: c.Partition}}
}

// catalogConfig is the sink's `catalog:` block.
type catalogConfig struct {
	// Type is sql (a catalog kept in a SQL database) or rest (an Iceberg
	// REST catalog: Polaris, Unity, Lakekeeper, Nessie, S3 Tables).
	// Required.
	Type string `yaml:"type"`
	// Name is the catalog's name, kept in a sql catalog's rows. If empty,
	// ehsink.
	Name string `yaml:"name"`
	// Driver is the sql catalog's database: sqlite (a file, for one
	// machine) or postgres. Required with type sql.
	Driver string `yaml:"driver"`
	// URI is the sqlite file's path, the PostgreSQL connection string
	// (postgres://...), or the REST catalog's base URL. Required.
	URI secret.String `yaml:"uri"`
	// Credential is a REST catalog's OAuth2 client credential,
	// client_id:client_secret.
	Credential secret.String `yaml:"credential"`
	// Token is a REST catalog's bearer token.
	Token secret.String `yaml:"token"`
	// Warehouse is the warehouse a REST catalog serves (its name or
	// location, as the catalog asks).
	Warehouse string `yaml:"warehouse"`
	// Properties are passed to the catalog as they are (iceberg-go
	// catalog properties, such as scope or rest.sigv4-enabled).
	Properties map[string]secret.String `yaml:"properties,omitempty"`
}

// warehouseConfig is the sink's `warehouse:` block: Dir or Blob.
type warehouseConfig struct {
	// Dir is a local directory, created if missing.
	Dir string `yaml:"dir"`
	// Blob is an Azure Blob (or ADLS Gen2) container.
	Blob *blobConfig `yaml:"blob"`
}

// blobConfig says which Blob container holds the warehouse.
type blobConfig struct {
	// Connection is a storage connection string. Required unless
	// AccountURL is set.
	Connection secret.String `yaml:"connection"`
	// AccountURL is the account's Blob endpoint,
	// https://ACCOUNT.blob.core.windows.net, reached with Entra ID
	// (azidentity.DefaultAzureCredential: a managed identity, workload
	// identity, environment or Azure CLI login), instead of Connection.
	AccountURL string `yaml:"account_url"`
	// Container holds the files; it must exist. Required.
	Container string `yaml:"container"`
	// Path is the folder in the container under which tables go. If
	// empty, the container's root.
	Path string `yaml:"path"`
}

// partitionField is one field of a partition spec.
type partitionField struct {
	// Column is the source column, one of the sink's columns. Required.
	Column string `yaml:"column"`
	// Transform is identity, year, month, day, hour (of a timestamp),
	// bucket[N] or truncate[W]. If empty, identity.
	Transform string `yaml:"transform"`
	// Name is the partition field's name. If empty, the column's name for
	// identity, else column_transform (ts_day, id_bucket).
	Name string `yaml:"name"`
}

// maintenanceConfig is the sink's `maintenance:` block.
type maintenanceConfig struct {
	// Disabled turns maintenance off (another job does it).
	Disabled bool `yaml:"disabled"`
	// Every is how often a sink runs maintenance, after one of its
	// commits. If zero, 1h.
	Every time.Duration `yaml:"every"`
	// KeepSnapshots is how many snapshots expiry always keeps. If zero,
	// 10.
	KeepSnapshots int `yaml:"keep_snapshots"`
	// MaxSnapshotAge expires snapshots older than this beyond
	// keep_snapshots. If zero, 1h.
	MaxSnapshotAge time.Duration `yaml:"max_snapshot_age"`
	// KeepMetadataFiles is how many previous metadata files a table the
	// sink creates keeps (write.metadata.previous-versions-max, with
	// write.metadata.delete-after-commit.enabled). If zero, 20.
	KeepMetadataFiles int `yaml:"keep_metadata_files"`
	// OrphanAge is how old a file no snapshot references must be before
	// it is removed as an orphan; younger ones may belong to a commit in
	// progress. If zero, 1h.
	OrphanAge time.Duration `yaml:"orphan_age"`
	// Compact rewrites small data files into files of about
	// CompactTargetSize at each maintenance, before the expiry.
	Compact bool `yaml:"compact"`
	// CompactTargetSize is the size compaction aims at; files under three
	// quarters of it are rewritten (at least five in a partition). If
	// zero, 128MiB.
	CompactTargetSize config.ByteSize `yaml:"compact_target_size"`
}

// Defaults, applied by withDefaults.
const (
	defaultCatalogName       = "ehsink"
	defaultMaxRows           = 500_000
	defaultMaxBytes          = 64 * config.MiB
	defaultMaxAge            = time.Minute
	defaultMaintenanceEvery  = time.Hour
	defaultKeepSnapshots     = 10
	defaultMaxSnapshotAge    = time.Hour
	defaultKeepMetadataFiles = 20
	defaultOrphanAge         = time.Hour
	defaultCompactTargetSize = 128 * config.MiB
)

func newConfig() *sinkConfig {
	c := &sinkConfig{}
	c.withDefaults()
	return c
}

func (c *sinkConfig) withDefaults() {
	if c.Catalog.Name == "" {
		c.Catalog.Name = defaultCatalogName
	}
	if c.Evolve == nil {
		c.Evolve = new(true)
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
	m := &c.Maintenance
	if m.Every == 0 {
		m.Every = defaultMaintenanceEvery
	}
	if m.KeepSnapshots == 0 {
		m.KeepSnapshots = defaultKeepSnapshots
	}
	if m.MaxSnapshotAge == 0 {
		m.MaxSnapshotAge = defaultMaxSnapshotAge
	}
	if m.KeepMetadataFiles == 0 {
		m.KeepMetadataFiles = defaultKeepMetadataFiles
	}
	if m.OrphanAge == 0 {
		m.OrphanAge = defaultOrphanAge
	}
	if m.CompactTargetSize == 0 {
		m.CompactTargetSize = defaultCompactTargetSize
	}
}

// Validate reports every problem of the config as a [*sinks.FieldError]
// (paths relative to the sink block), joined with errors.Join.
func (c *sinkConfig) Validate() error {
	cc := *c
	cc.withDefaults()
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	cat := &cc.Catalog
	switch cat.Type {
	case "":
		fe("catalog.type", errors.New("required (sql or rest)"))
	case "sql":
		switch cat.Driver {
		case "":
			fe("catalog.driver", errors.New("required with a sql catalog (sqlite or postgres)"))
		case "sqlite", "postgres":
		default:
			fe("catalog.driver", fmt.Errorf("unknown driver %q (want sqlite or postgres)", cat.Driver))
		}
		if cat.Credential != "" || cat.Token != "" || cat.Warehouse != "" {
			fe("catalog", errors.New("credential, token and warehouse are for a rest catalog"))
		}
		if cc.Warehouse.Dir == "" && cc.Warehouse.Blob == nil {
			fe("warehouse", errors.New("required with a sql catalog (dir or blob)"))
		}
	case "rest":
		if cat.Driver != "" {
			fe("catalog.driver", errors.New("is for a sql catalog"))
		}
		if cat.URI != "" {
			if u, err := url.Parse(cat.URI.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				fe("catalog.uri", errors.New("want the REST catalog's http(s) URL"))
			}
		}
		if cat.Credential != "" && cat.Token != "" {
			fe("catalog.token", errors.New("set either credential or token, not both"))
		}
	default:
		fe("catalog.type", fmt.Errorf("unknown catalog type %q (want sql or rest)", cat.Type))
	}
	if cat.URI == "" {
		fe("catalog.uri", errors.New("required"))
	} else if cat.Type == "sql" && cat.Driver == "postgres" && !strings.HasPrefix(cat.URI.Reveal(), "postgres://") && !strings.HasPrefix(cat.URI.Reveal(), "postgresql://") {
		fe("catalog.uri", errors.New("want a postgres:// connection string"))
	}
	if cc.Namespace == "" {
		fe("namespace", errors.New("required"))
	} else if strings.HasPrefix(cc.Namespace, ".") || strings.HasSuffix(cc.Namespace, ".") || strings.Contains(cc.Namespace, "..") {
		fe("namespace", errors.New("empty level"))
	}
	routed := len(cc.Routes) > 0
	if routed {
		for field, set := range map[string]bool{"table": cc.Table != "", "columns": len(cc.Columns) > 0,
			"explode": cc.Explode.IsSet(), "partition": len(cc.Partition) > 0} {
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
		tmpl, terr := expr.CompileTemplate(r.Table)
		switch j, dup := tables[r.Table]; {
		case r.Table == "":
			fe(prefix+"table", errors.New("required"))
		case terr != nil:
			fe(prefix+"table", terr)
		case !tmpl.Literal() && !routed:
			fe(prefix+"table", errors.New("a template of event values needs routes"))
		case !tmpl.Literal():
		case strings.ContainsAny(r.Table, "./"):
			fe(prefix+"table", errors.New("a table name has no . or /"))
		case dup:
			fe(prefix+"table", fmt.Errorf("routes[%d] has the same table", j))
		default:
			tables[r.Table] = i
		}
		if r.MaxTables < 0 {
			fe(prefix+"max_tables", errors.New("must not be negative"))
		}
		if err := errors.Join(r.Columns.Validate(), mapping.Options{Explode: r.Explode}.Validate(r.Columns)); err != nil {
			errs = append(errs, prefixFieldErrors(prefix+"columns", err))
			continue
		}
		for _, col := range r.Columns {
			if _, err := icebergType(col.Type); err != nil {
				fe(prefix+"columns."+col.Name+".type", err)
			}
		}
		for j, p := range r.Partition {
			field := fmt.Sprintf("%spartition[%d]", prefix, j)
			if _, err := p.transform(); err != nil {
				fe(field+".transform", err)
			}
			if p.Column == "" {
				fe(field+".column", errors.New("required"))
			} else if r.Columns.Index(p.Column) < 0 {
				fe(field+".column", fmt.Errorf("%q is not one of the columns", p.Column))
			}
		}
	}
	switch j, dup := tables[cc.deadLetterTable()]; {
	case strings.ContainsAny(cc.DeadLetterTable, "./{}"):
		fe("dead_letter_table", errors.New("a table name has no . or /"))
	case dup && routed:
		fe("dead_letter_table", fmt.Errorf("routes[%d] has the same table", j))
	case dup:
		fe("dead_letter_table", errors.New("is the table"))
	}
	w := &cc.Warehouse
	if w.Dir != "" && w.Blob != nil {
		fe("warehouse.blob", errors.New("set either dir or blob, not both"))
	}
	if w.Blob != nil {
		if field, err := connstr.Blob(w.Blob.Connection.Reveal(), w.Blob.AccountURL); err != nil {
			fe("warehouse.blob."+field, err)
		} else if _, _, err := w.Blob.account(); err != nil {
			fe("warehouse.blob."+w.Blob.field(), err)
		}
		if w.Blob.Container == "" {
			fe("warehouse.blob.container", errors.New("required"))
		}
	}
	if cc.MaxRows < 0 {
		fe("max_rows", errors.New("must not be negative"))
	}
	if cc.MaxBytes < 0 {
		fe("max_bytes", errors.New("must not be negative"))
	}
	if cc.MaxAge < 0 {
		fe("max_age", errors.New("must not be negative"))
	}
	m := &cc.Maintenance
	for field, neg := range map[string]bool{
		"maintenance.every": m.Every < 0, "maintenance.keep_snapshots": m.KeepSnapshots < 0,
		"maintenance.max_snapshot_age": m.MaxSnapshotAge < 0, "maintenance.keep_metadata_files": m.KeepMetadataFiles < 0,
		"maintenance.orphan_age": m.OrphanAge < 0, "maintenance.compact_target_size": m.CompactTargetSize < 0,
	} {
		if neg {
			fe(field, errors.New("must not be negative"))
		}
	}
	return errors.Join(errs...)
}

// transform parses the field's transform.
func (p partitionField) transform() (ice.Transform, error) {
	if p.Transform == "" {
		return ice.IdentityTransform{}, nil
	}
	t, err := ice.ParseTransform(p.Transform)
	switch t.(type) {
	case ice.IdentityTransform, ice.YearTransform, ice.MonthTransform, ice.DayTransform, ice.HourTransform, ice.BucketTransform, ice.TruncateTransform:
	default:
		err = errors.New("not a partition transform")
	}
	if err != nil {
		return nil, fmt.Errorf("unknown transform %q (want identity, year, month, day, hour, bucket[N] or truncate[W])", p.Transform)
	}
	return t, nil
}

// name is the partition field's name.
func (p partitionField) name(t ice.Transform) string {
	switch {
	case p.Name != "":
		return p.Name
	case p.Transform == "" || p.Transform == "identity":
		return p.Column
	}
	kind, _, _ := strings.Cut(t.String(), "[")
	return p.Column + "_" + kind
}

// prefixFieldErrors puts prefix in front of the paths of the field errors
// in err (a tree of errors.Join), and makes other errors errors of prefix.
func prefixFieldErrors(prefix string, err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, prefixFieldErrors(prefix, e))
		}
		return errors.Join(out...)
	}
	var f *sinks.FieldError
	if errors.As(err, &f) {
		sep := "."
		if len(f.Field) > 0 && f.Field[0] == '[' {
			sep = ""
		}
		return &sinks.FieldError{Field: prefix + sep + f.Field, Err: f.Err}
	}
	return &sinks.FieldError{Field: prefix, Err: err}
}

// String describes the destination, never a secret.
func (c *sinkConfig) String() string {
	var names []string
	for _, r := range c.routes() {
		names = append(names, c.Namespace+"."+r.Table)
	}
	if len(names) == 1 {
		return fmt.Sprintf("%s catalog table %s", c.Catalog.Type, names[0])
	}
	return fmt.Sprintf("%s catalog tables %s", c.Catalog.Type, strings.Join(names, ", "))
}

// TableShape returns the sink's routes, for `ehsink test` and for the
// sink itself, which maps events with the routes' Mapper and Check: one
// code path.
func (c *sinkConfig) TableShape() (tableshape.Shape, error) {
	sh := tableshape.Shape{Routed: len(c.Routes) > 0}
	var owners *routing.Owners
	for i, r := range c.routes() {
		dest := c.Namespace + "." + r.Table
		rt := tableshape.Route{Name: r.Name, When: r.When, Dest: dest, DestIsTable: true, Columns: r.Columns, Explode: r.Explode}
		if rt.Name == "" {
			rt.Name = dest
		}
		m, err := mapping.CompileWith(r.Columns, mapping.Options{Explode: r.Explode})
		if err != nil {
			if sh.Routed {
				return tableshape.Shape{}, fmt.Errorf("routes[%d].columns: %w", i, err)
			}
			return tableshape.Shape{}, fmt.Errorf("columns: %w", err)
		}
		cols := r.Columns
		rt.Mapper, rt.Check = m, func(row []any) error { return checkRow(cols, row, nil) }
		if tmpl, err := expr.CompileTemplate(r.Table); err == nil && !tmpl.Literal() {
			if owners == nil {
				owners = newOwners(c)
			}

			name := rt.Name
			rt.Render = func(ev *sinks.Event) (string, error) {
				table, err := renderTable(name, tmpl, ev)
				if err == nil {
					if err = owners.Check(i, table); err == nil {
						owners.Add(i, table)
					}
				}
				return c.Namespace + "." + table, err
			}
		}
		sh.Routes = append(sh.Routes, rt)
	}
	return sh, nil
}

// newOwners returns which route writes each table of c (see
// routing.Owners).
func newOwners(c *sinkConfig) *routing.Owners {
	routes := c.routes()
	names, max, literal := make([]string, len(routes)), make([]int, len(routes)), make([]string, len(routes))
	for i, r := range routes {
		names[i], max[i] = cmp.Or(r.Name, c.Namespace+"."+r.Table), cmp.Or(r.MaxTables, defaultMaxTables)
		if tmpl, err := expr.CompileTemplate(r.Table); err == nil && tmpl.Literal() {
			literal[i] = r.Table
		}
	}
	return routing.NewOwners(names, max, literal)
}

// maxTableName bounds a rendered table name.
const maxTableName = 128

// renderTable renders the table a templated route names for ev and checks
// that it is a table name: letters, digits and _, not starting with a
// digit, at most maxTableName bytes (an event cannot name a namespace or
// a path).
func renderTable(route string, tmpl *expr.Template, ev *sinks.Event) (string, error) {
	b, err := tmpl.Append(nil, ev)
	if err != nil {
		return "", fmt.Errorf("route %s: table: %w", route, err)
	}
	name := string(b)
	if name == "" || len(name) > maxTableName {
		return "", fmt.Errorf("route %s: table %q: want 1 to %d bytes", route, name, maxTableName)
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return "", fmt.Errorf("route %s: table %q is not a table name (letters, digits and _, not starting with a digit)", route, name)
		}
	}
	return name, nil
}

// warehouseLocation is the catalog's warehouse location with the io
// properties that reach it: a file:// URL of the local directory, or the
// abfs:// URL of the container with its connection string.
func (c *sinkConfig) warehouseLocation() (string, map[string]string, error) {
	w := c.Warehouse
	switch {
	case w.Dir != "":
		abs, err := filepath.Abs(w.Dir)
		if err != nil {
			return "", nil, fmt.Errorf("warehouse.dir: %w", err)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String(), nil, nil
	case w.Blob != nil:
		account, props, err := w.Blob.account()
		if err != nil {
			return "", nil, fmt.Errorf("warehouse.blob.%s: %w", w.Blob.field(), err)
		}
		// Readers of the table (Spark, Trino, Fabric) resolve the abfs://
		// location themselves: it names the account's DFS endpoint in its
		// cloud, which an account URL of another cloud gives.
		dfs := "dfs.core.windows.net"
		if d, ok := strings.CutPrefix(props["adls.endpoint"], "blob."); ok {
			dfs = "dfs." + d
		}
		loc := fmt.Sprintf("abfs://%s@%s.%s", w.Blob.Container, account, dfs)
		if p := strings.Trim(w.Blob.Path, "/"); p != "" {
			loc += "/" + p
		}
		return loc, props, nil
	}
	return "", nil, nil
}

// account returns the storage account of b and the io properties that
// reach it: its connection string, or with an account URL the endpoint
// that iceberg-go reaches with Entra ID (its DefaultAzureCredential, as
// the other sinks' account_url): ACCOUNT.DOMAIN, or on a loopback host
// the emulator's path-style HOST:PORT/ACCOUNT.
func (b *blobConfig) account() (string, map[string]string, error) {
	if b.AccountURL == "" {
		conn := b.Connection.Reveal()
		account, _, err := blobAccount(conn)
		if err != nil {
			return "", nil, err
		}
		return account, map[string]string{"adls.connection-string." + account: conn}, nil
	}
	u, err := url.Parse(b.AccountURL)
	if err != nil {
		return "", nil, err
	}
	account, domain, _ := strings.Cut(u.Host, ".")
	if p := strings.Trim(u.Path, "/"); p != "" { // the emulator's path-style endpoint
		account, domain = p, u.Host
	}
	if account == "" || domain == "" {
		return "", nil, errors.New("want https://ACCOUNT.blob.core.windows.net")
	}
	return account, map[string]string{"adls.endpoint": domain, "adls.protocol": u.Scheme}, nil
}

// field names the setting b reaches its account with.
func (b *blobConfig) field() string {
	if b.AccountURL != "" {
		return "account_url"
	}
	return "connection"
}

// blobAccount returns the account name of a storage connection string, and
// whether it is the development storage (Azurite).
func blobAccount(conn string) (string, bool, error) {
	for part := range strings.SplitSeq(conn, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "UseDevelopmentStorage") && strings.EqualFold(v, "true"):
			return "devstoreaccount1", true, nil
		case strings.EqualFold(k, "AccountName") && v != "":
			return v, strings.EqualFold(v, "devstoreaccount1"), nil
		}
	}
	return "", false, errors.New("names no AccountName (the account is part of the warehouse's abfs:// location)")
}
