package parquet

import (
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/parquetfile"
	"time"

	"github.com/ehsink/ehsink/internal/config"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

// sinkConfig is the `sink:` block of a connector with `type: parquet`. Exactly
// one of Dir and Blob is required, and Columns. [newConfig] returns one
// with every default set; a zero sinkConfig gets the same defaults from New.
type sinkConfig struct {
	// Dir writes files under a local directory, created if missing.
	Dir string `yaml:"dir"`
	// Blob writes files to an Azure Blob container.
	Blob *blobConfig `yaml:"blob"`
	// Path is the template of a file's path under Dir or in the container.
	// Placeholders: {eventhub}, {connector}, {consumer_group}, {partition},
	// {enqueued_date} (YYYY-MM-DD), {year}, {month}, {day}, {hour} (all of
	// the enqueued time of the file's first event, UTC), {first_seq} and
	// {last_seq} (the sequence range the file covers; {first_seq:020}
	// zero-pads to 20 digits). {partition}, {first_seq} and {last_seq} are
	// required, and {last_seq} only in the file name. If empty, [DefaultPath].
	Path string `yaml:"path"`
	// Columns maps event values to the file's columns, in the mapping
	// language shared with the PostgreSQL sink. Required unless Routes are
	// set.
	Columns mapping.Columns `yaml:"columns"`
	// Explode, when set, makes one row per element of the array at this
	// JSON path (such as $.records): the element is the `$` of the columns,
	// and @index its position (see [mapping.Options]). All rows of an
	// event go to the same file (with routes, to its route's; every route
	// explodes).
	Explode mapping.Path `yaml:"explode,omitempty"`
	// Routes send each event to the files of the first route whose
	// condition holds, each route with its path and columns (see [Route]).
	// With routes, Path is where the dead letters go (its folder's
	// _dead_letters) and Columns is not set.
	Routes []routeConfig `yaml:"routes,omitempty"`
	// MaxOpenFiles rolls the open files of a partition once a routed
	// partition has this many (one per route and value of its path):
	// memory is about max_open_files x row_group_size per partition. If
	// zero, 16.
	MaxOpenFiles int `yaml:"max_open_files"`
	// Compression is zstd, snappy or none. If empty, zstd.
	Compression string `yaml:"compression"`
	// RowGroupSize is the in-memory size at which a row group is written
	// out to the file; memory is about RowGroupSize per open partition.
	// If zero, 32MiB.
	RowGroupSize config.ByteSize `yaml:"row_group_size"`
	// MaxRows rolls a file (commits it) once it holds at least this many
	// rows. If zero, 1,000,000.
	MaxRows int64 `yaml:"max_rows"`
	// MaxBytes rolls a file once its estimated size reaches this. If zero,
	// 256MiB.
	MaxBytes config.ByteSize `yaml:"max_bytes"`
	// MaxAge rolls a file this long after its first event was written, so
	// that a quiet partition still commits and checkpoints. If zero, 5m.
	MaxAge time.Duration `yaml:"max_age"`
}

// routeConfig is one entry of a parquet sink's `routes:` list.
type routeConfig struct {
	// Name names the route in errors, logs and the tests of `ehsink test`.
	// If empty, its path as written.
	Name string `yaml:"name"`
	// When is the condition an event must meet to take this route (package
	// expr). Empty: every event no earlier route took (the default route).
	When string `yaml:"when"`
	// Path is the route's path template: the placeholders of Config.Path
	// ({partition}, {first_seq} and {last_seq} required), and values of
	// the event, such as type={$.type}/{partition}-{first_seq}-{last_seq}.parquet.
	// A value must be letters, digits and - _ . = (not starting with _ or
	// .), at most 128 bytes, else the event is a dead letter. Required.
	Path string `yaml:"path"`
	// Columns maps event values to the route's files' columns. Required.
	Columns mapping.Columns `yaml:"columns"`
}

// blobConfig says which Blob container receives the files.
type blobConfig struct {
	// Connection is a storage connection string. Required unless
	// AccountURL is set.
	Connection secret.String `yaml:"connection"`
	// AccountURL is the account's Blob endpoint,
	// https://ACCOUNT.blob.core.windows.net, reached with Entra ID
	// (azidentity.DefaultAzureCredential: a managed identity, workload
	// identity, environment or Azure CLI login), instead of Connection.
	AccountURL string `yaml:"account_url"`
	// Container holds the files; it is created if missing. Required.
	Container string `yaml:"container"`
	// SpoolDir holds each open file until it is uploaded at commit. If
	// empty, a folder ehsink-parquet in the system's temporary directory.
	SpoolDir string `yaml:"spool_dir"`
}

// Defaults, applied by withDefaults.
const (
	defaultRowGroupSize = 32 * config.MiB
	defaultMaxRows      = 1_000_000
	defaultMaxBytes     = 256 * config.MiB
	defaultMaxAge       = 5 * time.Minute
	defaultMaxOpenFiles = 16
)

// newConfig returns a Config with its defaults set.
func newConfig() *sinkConfig {
	c := &sinkConfig{}
	c.withDefaults()
	return c
}

func (c *sinkConfig) withDefaults() {
	if c.Path == "" {
		c.Path = defaultPath
	}
	if c.Compression == "" {
		c.Compression = "zstd"
	}
	if c.RowGroupSize == 0 {
		c.RowGroupSize = defaultRowGroupSize
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
	if c.MaxOpenFiles == 0 {
		c.MaxOpenFiles = defaultMaxOpenFiles
	}
}

// routes returns c's routes: its Routes, or the one route of a sink without
// them.
func (c *sinkConfig) routes() []routeConfig {
	if len(c.Routes) > 0 {
		return c.Routes
	}
	return []routeConfig{{Path: c.Path, Columns: c.Columns}}
}

// Validate reports every problem of the config as a [*sinks.FieldError]
// (paths relative to the sink block), joined with errors.Join. It checks a
// copy with defaults applied, so a hand-built Config validates as New sees it.
func (c *sinkConfig) Validate() error {
	cc := *c
	cc.withDefaults()
	var errs []error
	fe := func(field string, err error) { errs = append(errs, &sinks.FieldError{Field: field, Err: err}) }
	switch {
	case cc.Dir == "" && cc.Blob == nil:
		fe("dir", errors.New("one of dir or blob is required"))
	case cc.Dir != "" && cc.Blob != nil:
		fe("blob", errors.New("set either dir or blob, not both"))
	}
	if cc.Blob != nil {
		if field, err := connstr.Blob(cc.Blob.Connection.Reveal(), cc.Blob.AccountURL); err != nil {
			fe("blob."+field, err)
		}
		if cc.Blob.Container == "" {
			fe("blob.container", errors.New("required"))
		}
	}
	if _, err := parseTemplate(cc.Path); err != nil {
		fe("path", err)
	}
	routed := len(cc.Routes) > 0
	if routed && len(cc.Columns) > 0 {
		fe("columns", errors.New("set per route when routes are given"))
	}
	var whens routing.WhenChecker
	paths := map[string]int{}
	for i, r := range cc.routes() {
		prefix := ""
		if routed {
			prefix = fmt.Sprintf("routes[%d].", i)
			if err := whens.Check(i, r.When); err != nil {
				fe(prefix+"when", err)
			}
			if _, err := parseRouteTemplate(r.Path); err != nil {
				fe(prefix+"path", err)
			} else if j, dup := paths[r.Path]; dup {
				fe(prefix+"path", fmt.Errorf("routes[%d] has the same path", j))
			} else if r.Path == cc.Path {
				fe(prefix+"path", errors.New("the sink's path is where the dead letters of a routed sink go; give the route another"))
			}
			paths[r.Path] = i
		}
		if err := errors.Join(r.Columns.Validate(), mapping.Options{Explode: cc.Explode}.Validate(r.Columns)); err != nil {
			errs = append(errs, prefixFieldErrors(prefix+"columns", err))
		} else {
			for _, col := range r.Columns {
				if _, err := parquetfile.LeafNode(col.Type); err != nil {
					fe(prefix+"columns."+col.Name+".type", err)
				}
			}
		}
	}
	if cc.MaxOpenFiles < 0 {
		fe("max_open_files", errors.New("must not be negative"))
	}
	if _, err := parquetfile.Codec(cc.Compression); err != nil {
		fe("compression", err)
	}
	if cc.RowGroupSize < 0 {
		fe("row_group_size", errors.New("must not be negative"))
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
	return errors.Join(errs...)
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

// String describes the destination, never the connection string.
func (c *sinkConfig) String() string {
	if c.Blob != nil {
		return fmt.Sprintf("blob container %s", c.Blob.Container)
	}
	return "dir " + c.Dir
}
