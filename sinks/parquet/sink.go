package parquet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"github.com/ehsink/ehsink/internal/buildinfo"
	"github.com/ehsink/ehsink/internal/parquetfile"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/internal/table/routing"
	"github.com/ehsink/ehsink/sinks"
)

func init() { sinks.Register("parquet", driver{}) }

// driver is the registered sinks.Driver of the parquet sink.
type driver struct{}

// NewConfig returns a *Config with its defaults set.
func (driver) NewConfig() any { return newConfig() }

// New builds a Sink from a *Config made by NewConfig.
func (driver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*sinkConfig)
	if !ok {
		return nil, fmt.Errorf("parquet: config is %T, want *parquet.Config", cfg)
	}
	return newParquetSink(ctx, c, info)
}

// sink writes each partition's events to rolled Parquet files. It is safe
// for concurrent use; each of its writers is used by one goroutine at a time.
type sink struct {
	cfg   sinkConfig
	info  sinks.Info
	log   *slog.Logger
	store store
	// tmpl is the sink's path: the data files of a sink without routes,
	// the dead letters' folder of one with routes.
	tmpl   *template
	dlTmpl *template
	codec  compress.Codec
	routes []*route
	sel    *routing.Selector // nil without routes
	// layout is what the claims' folder is named after: the sink's path,
	// and the routes' paths.
	layout string
	// createdBy names the build in every file's footer (created_by):
	// "ehsink version V (build COMMIT)", from internal/buildinfo.
	createdBy pq.WriterOption
	// now is the clock for max_age; tests replace it.
	now    func() time.Time
	closed atomic.Bool
}

// newParquetSink validates cfg and builds a Sink. For a Blob destination it creates
// the container if missing; ctx bounds that call only. newParquetSink starts no
// goroutines.
func newParquetSink(ctx context.Context, cfg *sinkConfig, info sinks.Info) (*sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("parquet sink of connector %q: %w", info.Connector, err)
	}
	c := *cfg
	c.withDefaults()
	// parquet-go writes "APP version V(build B)"; the space after the
	// version gives the usual "ehsink version V (build B)", as parquet-mr
	// writes it.
	build := buildinfo.Get()
	s := &sink{cfg: c, info: info, log: info.Logger, now: time.Now, createdBy: pq.CreatedBy("ehsink", build.Version+" ", build.Commit)}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("sink", "parquet", "dest", c.String())
	var err error
	if s.tmpl, err = parseTemplate(c.Path); err != nil {
		return nil, err
	}
	s.dlTmpl = s.tmpl.deadLetterTemplate()
	if s.codec, err = parquetfile.Codec(c.Compression); err != nil {
		return nil, err
	}
	s.layout = c.Path
	var conds []routing.Cond
	var names []string
	for i, rc := range c.routes() {
		r, err := compileRoute(rc, c.Explode)
		if err != nil {
			return nil, fmt.Errorf("parquet sink of connector %q: routes[%d]: %w", info.Connector, i, err)
		}
		var cond routing.Cond
		if rc.When != "" {
			if cond, err = routing.CompileCondition(rc.When); err != nil {
				return nil, fmt.Errorf("parquet sink of connector %q: routes[%d].when: %w", info.Connector, i, err)
			}
		}
		s.routes = append(s.routes, r)
		conds, names = append(conds, cond), append(names, r.name)
		if len(c.Routes) > 0 {
			s.layout += "\x00" + rc.Path
		}
	}
	if len(c.Routes) > 0 {
		s.sel = routing.NewSelector(conds, names)
	}
	if c.Blob != nil {
		client, err := newBlobClient(c.Blob)
		if err != nil {
			return nil, fmt.Errorf("parquet sink of connector %q: %w", info.Connector, err)
		}
		spool := c.Blob.SpoolDir
		if spool == "" {
			spool = filepath.Join(os.TempDir(), "ehsink-parquet")
		}
		if s.store, err = newBlobStore(ctx, client, c.Blob.Container, spool); err != nil {
			return nil, fmt.Errorf("parquet sink of connector %q: %w", info.Connector, err)
		}
	} else if s.store, err = newLocalStore(c.Dir); err != nil {
		return nil, fmt.Errorf("parquet sink of connector %q: %w", info.Connector, err)
	}
	return s, nil
}

// route is one compiled route (the whole sink's, without routes).
type route struct {
	name   string
	tmpl   *template
	schema *pq.Schema
	mapper *parquetfile.RowMapper
	// noBounds are the Parquet writer options that leave min/max
	// statistics out for the columns whose statistics parquet-go gets
	// wrong (see parquetfile.BoundsOptions).
	noBounds []pq.WriterOption
}

func compileRoute(rc routeConfig, explode mapping.Path) (*route, error) {
	r := &route{name: rc.Name}
	if r.name == "" {
		r.name = rc.Path
	}
	var err error
	if r.tmpl, err = parseRouteTemplate(rc.Path); err != nil {
		return nil, err
	}
	if r.schema, err = parquetfile.Schema("ehsink", rc.Columns); err != nil {
		return nil, err
	}
	if r.mapper, err = parquetfile.NewRowMapper(rc.Columns, explode); err != nil {
		return nil, err
	}
	r.noBounds = parquetfile.BoundsOptions(rc.Columns)
	return r, nil
}

// routed reports whether the sink has routes.
func (s *sink) routed() bool { return s.sel != nil }

// Close marks the sink closed; Open then fails with sinks.ErrClosed. It
// closes no writer: the runner closes them first. Close is idempotent.
func (s *sink) Close(context.Context) error {
	s.closed.Store(true)
	return nil
}

// Open prepares the writer of a partition. It removes the temporary files
// an earlier writer of the partition left behind, finds the partition's
// watermark in the names of its committed files (the highest last sequence
// number; the offset comes from that file's metadata), and removes dead-
// letter files past the watermark: they belong to a commit whose data file
// never became visible, and the replay writes them again. ctx bounds the
// call only.
func (s *sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if s.closed.Load() {
		return nil, nil, sinks.ErrClosed
	}
	vars := nameVars{eventHub: s.info.EventHub, connector: s.info.Connector, consumerGroup: s.info.ConsumerGroup, partition: partition}
	w := &writer{s: s, partition: partition, vars: vars, tag: tempTag(s.info.Connector, partition), id: randomHex(8)}
	w.log = s.log.With("partition", partition)
	fail := func(err error) (sinks.Writer, *sinks.Position, error) {
		return nil, nil, fmt.Errorf("connector %q partition %s: open: %w", s.info.Connector, partition, err)
	}
	for _, r := range s.routes {
		w.dataMs = append(w.dataMs, r.tmpl.matcher(vars))
	}
	w.dlM = s.dlTmpl.matcher(vars)
	claimsPrefix := w.dataMs[0].prefix
	if s.routed() {
		claimsPrefix = w.dlM.prefix
	}
	w.claims = claimsDir(w.tag, s.layout, claimsPrefix)
	w.prefixes = listPrefixes(append([]*matcher{w.dlM}, w.dataMs...))
	objs, err := w.list(ctx)
	if err != nil {
		return fail(err)
	}
	// Commits claimed and not published are finished (or dropped) first:
	// their temporary files may be what they publish.
	wm, _ := w.newest(objs)
	if after, err := s.recoverClaims(ctx, w, wm); err != nil {
		return fail(err)
	} else if after != wm || s.routed() {
		if objs, err = w.list(ctx); err != nil {
			return fail(err)
		}
	}
	removed := 0
	for _, p := range append(slices.Clone(w.prefixes), w.claims) {
		tag := w.tag
		if p == w.claims {
			tag = claimTempTag
		}
		n, err := s.store.cleanTemps(ctx, p, tag)
		if err != nil {
			return fail(err)
		}
		removed += n
	}
	if removed > 0 {
		w.log.Info("removed temporary files of abandoned writers", "count", removed)
	}
	wm, newest := w.newest(objs)
	for _, o := range objs {
		if _, last, ok := w.dlM.match(o.name); ok && last > wm {
			if err := s.store.remove(ctx, o.name); err != nil {
				return fail(err)
			}
			w.log.Info("removed dead letters of an unfinished commit", "file", o.name)
		}
	}
	s.sweepClaims(ctx, w, wm)
	if newest != nil {
		if w.watermark, err = s.positionOf(ctx, newest, wm); err != nil {
			return fail(err)
		}
		w.log.Debug("resuming after committed file", "file", newest.name, "seq", wm)
	}
	return w, w.watermark, nil
}

// listPrefixes returns the folders to list to find every file of ms: each
// matcher's prefix, without those inside another.
func listPrefixes(ms []*matcher) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.prefix)
	}
	slices.Sort(out)
	keep := out[:0]
	for _, p := range out {
		if len(keep) > 0 && strings.HasPrefix(p, keep[len(keep)-1]) {
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

// list lists the committed objects under the writer's prefixes.
func (w *writer) list(ctx context.Context) ([]object, error) {
	var all []object
	for _, p := range w.prefixes {
		objs, err := w.s.store.list(ctx, p)
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}

// newest returns the last sequence number of the newest committed file of
// the partition among objs (-1 when there is none) and that file: the data
// files of every route and, with routes, the dead-letter files (a flush
// with only dead letters writes no data file then). A data file wins a tie.
func (w *writer) newest(objs []object) (int64, *object) {
	var newest *object
	var wm int64 = -1
	for i, o := range objs {
		for _, m := range w.dataMs {
			if _, last, ok := m.match(o.name); ok && (last > wm || last == wm && newest != nil && !isParquet(newest.name)) {
				wm, newest = last, &objs[i]
			}
		}
		if w.s.routed() {
			if _, last, ok := w.dlM.match(o.name); ok && last > wm {
				wm, newest = last, &objs[i]
			}
		}
	}
	return wm, newest
}

func isParquet(name string) bool { return strings.HasSuffix(name, ".parquet") }

// positionOf is the watermark a committed data file stands for: its last
// sequence number, and the offset kept in its footer.
func (s *sink) positionOf(ctx context.Context, o *object, last int64) (*sinks.Position, error) {
	if !isParquet(o.name) {
		// A dead-letter file (a routed flush of dead letters only): the
		// offset is not kept, and the runner resumes by sequence number.
		return &sinks.Position{SequenceNumber: last}, nil
	}
	meta, err := readKeyValues(ctx, s.store, o.name, o.size)
	if err != nil {
		return nil, err
	}
	return &sinks.Position{SequenceNumber: last, Offset: meta[metaLastOffset]}, nil
}

// tempTag names the temporary files of one connector's partition, so that
// Open removes only its own.
func tempTag(connector, partition string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
				return r
			}
			return '_'
		}, s)
	}
	return clean(connector) + "-p" + clean(partition)
}

// Key-value metadata written in every data file's footer: what the name
// says, plus the offset of the last event, so a file explains itself.
const (
	metaEventHub   = "ehsink.eventhub"
	metaPartition  = "ehsink.partition"
	metaFirstSeq   = "ehsink.first_sequence_number"
	metaLastSeq    = "ehsink.last_sequence_number"
	metaLastOffset = "ehsink.last_offset"
)

// readKeyValues reads the key-value metadata of a committed Parquet file
// from its footer, with two small reads at the end of the file.
func readKeyValues(ctx context.Context, st store, name string, size int64) (map[string]string, error) {
	const trailer = 8 // footer length (4 bytes, little endian) + "PAR1"
	if size < 12 {
		return nil, fmt.Errorf("file %q: %d bytes is too short for Parquet", name, size)
	}
	tail, err := st.readTail(ctx, name, size, trailer)
	if err != nil {
		return nil, err
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("file %q: not a Parquet file (no PAR1 trailer)", name)
	}
	n := int64(uint32(tail[0]) | uint32(tail[1])<<8 | uint32(tail[2])<<16 | uint32(tail[3])<<24)
	if n+trailer+4 > size {
		return nil, fmt.Errorf("file %q: footer length %d past the file start", name, n)
	}
	footer, err := st.readTail(ctx, name, size, n+trailer)
	if err != nil {
		return nil, err
	}
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), footer[:n], &md); err != nil {
		return nil, fmt.Errorf("file %q: footer: %w", name, err)
	}
	kv := make(map[string]string, len(md.KeyValueMetadata))
	for _, e := range md.KeyValueMetadata {
		kv[e.Key] = e.Value
	}
	return kv, nil
}

// countingWriter counts the bytes that reached the pending object, which
// tells how much of the writer's size estimate is still in memory.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}
