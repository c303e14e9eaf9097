package delta

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/google/uuid"
	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"

	"github.com/ehsink/ehsink/internal/backoff"
	"github.com/ehsink/ehsink/internal/buildinfo"
	"github.com/ehsink/ehsink/internal/connstr"
	"github.com/ehsink/ehsink/internal/deltalog"
	"github.com/ehsink/ehsink/internal/netdial"
	"github.com/ehsink/ehsink/internal/parquetfile"
	"github.com/ehsink/ehsink/internal/table/commit"
	"github.com/ehsink/ehsink/internal/table/mapping"
	"github.com/ehsink/ehsink/sinks"
)

func init() { sinks.Register("delta", driver{}) }

// driver is the registered sinks.Driver of the delta sink.
type driver struct{}

// NewConfig returns a *sinkConfig with its defaults set.
func (driver) NewConfig() any { return newConfig() }

// New builds a Sink from a *sinkConfig made by NewConfig.
func (driver) New(ctx context.Context, cfg any, info sinks.Info) (sinks.Sink, error) {
	c, ok := cfg.(*sinkConfig)
	if !ok {
		return nil, fmt.Errorf("delta: config is %T, want *delta.sinkConfig", cfg)
	}
	if len(c.Routes) > 0 {
		return newRoutedSink(ctx, c, info)
	}
	return newDeltaSink(ctx, c, info)
}

// sink appends each partition's events to one Delta table. It is safe for
// concurrent use; each of its writers is used by one goroutine at a time.
type sink struct {
	cfg   sinkConfig
	info  sinks.Info
	log   *slog.Logger
	dlog  *deltalog.Log
	store deltalog.Store
	// mapper maps an event to all the columns; data converts the data
	// columns (all but the partition columns, which Delta keeps in the
	// log, not in the files) to Parquet values, in dataIdx order.
	mapper  *mapping.Mapper
	data    *parquetfile.RowMapper
	dataIdx []int
	parts   []partitionSpec
	schema  *pq.Schema
	wopts   []pq.WriterOption
	tag     string // names the connector's data files (fileTag)
	// rowGroup is rowGroupBytes; a test makes it small.
	rowGroup int64
	now      func() time.Time
	// hook, when set by a test, is called at each step of a commit and
	// may fail it there (crash tests); queued, when set by a test, is
	// called once a writer's commit is queued (grouped commits).
	hook   func(step string) error
	queued func()

	// mu serializes the commits of the sink's writers (they would
	// otherwise lose the optimistic race to each other) and guards snap.
	mu   sync.Mutex
	snap *deltalog.Snapshot // the newest state of the log this sink has read
	// checked is the table metadata the columns were last checked
	// against (checkTable); a commit after another engine changed it
	// checks again.
	checked *deltalog.Metadata
	// qmu guards queue, apart from mu, which the commit in progress holds.
	qmu   sync.Mutex
	queue []*commitReq

	// dl is the dead-letter table's sink; nil in that sink itself.
	dl *sink
	// letterStore reads and replays dl's letters; nil where dl is (the
	// dead-letter table's sink, a route's table).
	*letterStore

	closed atomic.Bool
}

// The steps of a commit, at which a test's hook may stop it.
const (
	stepDataWritten  = "data-written" // the data files are durable, no commit yet
	stepCommitted    = "committed"    // the commit file is created
	stepCheckpointed = "checkpointed" // the checkpoint is written, _last_checkpoint not yet
)

// newDeltaSink opens the table's storage, loads its log, creates the table
// if missing and checks that the columns fit its schema. ctx bounds these
// calls only; newDeltaSink starts no goroutines.
func newDeltaSink(ctx context.Context, cfg *sinkConfig, info sinks.Info) (*sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("delta sink of connector %q: %w", info.Connector, err)
	}
	c := *cfg
	c.withDefaults()
	s := &sink{cfg: c, info: info, log: info.Logger, now: time.Now, rowGroup: rowGroupBytes}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.With("sink", "delta", "dest", c.String())
	fail := func(err error) (*sink, error) {
		return nil, fmt.Errorf("delta sink of connector %q: table %s: %w", info.Connector, c.Table, err)
	}
	var err error
	if s.store, err = openStore(ctx, &c); err != nil {
		return fail(err)
	}
	s.dlog = deltalog.New(s.store)
	if err := s.compile(); err != nil {
		return fail(err)
	}
	if s.snap, err = s.dlog.Load(ctx); err != nil {
		return fail(err)
	}
	if s.snap.Version < 0 {
		if !c.CreateTable {
			return fail(errors.New("no Delta table there (no _delta_log/00000000000000000000.json) and create_table is false"))
		}
		if err := s.createTable(ctx); err != nil {
			return fail(err)
		}
	} else if c.evolves() {
		if err := s.evolve(ctx); err != nil {
			return fail(fmt.Errorf("add the columns it lacks: %w", err))
		}
	}
	if err := s.checkTable(s.snap); err != nil {
		return fail(err)
	}
	s.checked = s.snap.Metadata
	s.tag = fileTag(info)
	if err := s.vacuum(ctx, s.snap); err != nil {
		return fail(fmt.Errorf("vacuum: %w", err))
	}
	if !c.letters && !c.routed {
		if s.dl, err = newDeadLetterSink(ctx, &c, info); err != nil {
			return fail(err)
		}
		s.letterStore = &letterStore{info: info, dl: s.dl, tables: []*sink{s}}
	}
	return s, nil
}

// newDeadLetterSink opens the dead-letter table of the sink of c.
func newDeadLetterSink(ctx context.Context, c *sinkConfig, info sinks.Info) (*sink, error) {
	dc := *c
	dc.Table, dc.DeadLetterTable, dc.Explode, dc.PartitionBy, dc.Properties, dc.Routes, dc.letters = c.deadLetterTable(), "", mapping.Path{}, nil, nil, nil, true
	var err error
	if dc.Columns, err = deadLetterColumns(); err != nil {
		return nil, err
	}
	dl, err := newDeltaSink(ctx, &dc, info)
	if err != nil {
		return nil, fmt.Errorf("dead-letter table: %w", err)
	}
	return dl, nil
}

// openStore returns the table's storage: a local directory or a folder of
// a Blob container.
func openStore(ctx context.Context, c *sinkConfig) (deltalog.Store, error) {
	if c.Blob == nil {
		return deltalog.NewLocalStore(c.Table)
	}
	opts := &container.ClientOptions{}
	// The transport closes a half-open connection in seconds (package
	// netdial); the writer's calls carry the runner's deadline.
	opts.Transport = netdial.HTTPClient()
	client, err := connstr.BlobContainer(c.Blob.Connection.Reveal(), c.Blob.AccountURL, c.Blob.Container, nil, opts)
	if err != nil {
		return nil, fmt.Errorf("blob.%w", err)
	}
	if _, err := client.GetProperties(ctx, nil); err != nil {
		return nil, fmt.Errorf("blob container %s: %w", c.Blob.Container, sinks.Transient(err))
	}
	return deltalog.NewBlobStore(client, c.Blob.Container, c.Table), nil
}

// compile builds the mapping, the data files' schema and writer options.
func (s *sink) compile() error {
	c := &s.cfg
	m, err := mapping.CompileWith(c.Columns, mapping.Options{Explode: c.Explode})
	if err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	s.mapper = m
	for _, p := range c.PartitionBy {
		ps, err := parsePartition(p, c.Columns)
		if err != nil {
			return fmt.Errorf("partition_by: %w", err)
		}
		s.parts = append(s.parts, ps)
	}
	var dataCols mapping.Columns
	for i, col := range c.Columns {
		if slices.ContainsFunc(s.parts, func(p partitionSpec) bool { return !p.day && p.col == i }) {
			continue // Delta keeps an identity partition column in the log, not in the files
		}
		dataCols = append(dataCols, col)
		s.dataIdx = append(s.dataIdx, i)
	}

	if s.data, err = parquetfile.NewRowMapper(dataCols, mapping.Path{}); err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	if s.schema, err = parquetfile.Schema("spark_schema", dataCols); err != nil {
		return fmt.Errorf("columns: %w", err)
	}
	var codec compress.Codec
	if codec, err = parquetfile.Codec(c.Compression); err != nil {
		return fmt.Errorf("compression: %w", err)
	}
	build := buildinfo.Get()
	s.wopts = append([]pq.WriterOption{s.schema, pq.Compression(codec), pq.DataPageStatistics(true),
		pq.CreatedBy("ehsink", build.Version+" ", build.Commit), pq.DictionaryMaxBytes(parquetfile.DictionaryMaxBytes)},
		parquetfile.BoundsOptions(dataCols)...)
	return nil
}

// fields returns the table schema's fields of the columns.
func (s *sink) fields() []deltalog.StructField {
	var out []deltalog.StructField
	for _, col := range s.cfg.Columns {
		t, _ := deltaType(col.Type) // checked by Validate
		out = append(out, deltalog.PrimitiveField(col.Name, t, col.Nullable))
	}
	for _, p := range s.parts {
		if p.day {
			out = append(out, deltalog.PrimitiveField(p.name, "date", false))
		}
	}
	return out
}

// createTable commits version 0: the protocol (reader 1, writer 2, no
// table features) and the metadata. A table another replica created
// first is read instead.
func (s *sink) createTable(ctx context.Context) error {
	schema, err := deltalog.SchemaString(s.fields())
	if err != nil {
		return err
	}
	created := s.now().UnixMilli()
	conf := map[string]string{}
	for k, v := range s.cfg.Properties {
		conf[k] = v
	}
	actions := []deltalog.Action{
		{Protocol: &deltalog.Protocol{MinReaderVersion: deltalog.ReaderVersion, MinWriterVersion: deltalog.WriterVersion}},
		{MetaData: &deltalog.Metadata{ID: uuid.NewString(), Format: deltalog.Format{Provider: "parquet", Options: map[string]string{}},
			SchemaString: schema, PartitionColumns: s.partitionColumns(), Configuration: conf, CreatedTime: &created}},
		{CommitInfo: s.commitInfo("CREATE TABLE", nil)},
	}
	err = s.dlog.Commit(ctx, 0, actions)
	if err != nil && !errors.Is(err, deltalog.ErrVersionExists) {
		return fmt.Errorf("create: %w", err)
	}
	if err := s.dlog.Update(ctx, s.snap); err != nil {
		return err
	}
	if err == nil {
		s.log.Info("created delta table", "table", s.cfg.Table)
	}
	return nil
}

// evolve commits, when the table's schema lacks mapped columns, a version
// whose metaData is the schema with those columns added, nullable (the
// files already there have no value for them), before the sink writes a
// row that carries them. Partition columns, configuration and the table's
// id stay as they are. The widened table must pass checkTable first: a
// table the sink would refuse anyway is not changed. A version another
// writer took is read and the step judged again on it: another replica
// may have added the same columns.
func (s *sink) evolve(ctx context.Context) error {
	bo := backoff.Backoff{Initial: 5 * time.Millisecond, Max: time.Second}
	for attempt := 1; ; attempt++ {
		snap := s.snap
		if err := deltalog.CheckWritable(snap.Protocol); err != nil {
			return err
		}
		fields, err := deltalog.ParseSchema(snap.Metadata.SchemaString)
		if err != nil {
			return err
		}
		var added []string
		for _, f := range s.fields() {
			if slices.ContainsFunc(fields, func(t deltalog.StructField) bool { return strings.EqualFold(t.Name, f.Name) }) ||
				slices.Contains(s.partitionColumns(), f.Name) {
				continue // a partition column missing is checkTable's error
			}
			f.Nullable = true
			fields = append(fields, f)
			added = append(added, f.Name)
		}
		if len(added) == 0 {
			return nil
		}
		m := *snap.Metadata
		if m.SchemaString, err = deltalog.SchemaString(fields); err != nil {
			return err
		}
		widened := *snap
		widened.Metadata = &m
		if err := s.checkTable(&widened); err != nil {
			return err
		}
		version := snap.Version + 1
		actions := []deltalog.Action{
			{MetaData: &m},
			{CommitInfo: s.commitInfo("ADD COLUMNS", map[string]any{"columns": added})},
		}
		err = s.dlog.Commit(ctx, version, actions)
		if errors.Is(err, deltalog.ErrVersionExists) && attempt < maxCommitAttempts {
			if err := s.dlog.Update(ctx, snap); err != nil {
				return err
			}
			if err := wait(ctx, bo.Jittered()); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			// A start that fails is made again; if the commit went through
			// after all, the columns are then there.
			return fmt.Errorf("version %d: %w", version, err)
		}
		if err := snap.Apply(version, actions); err != nil {
			return err
		}
		for _, f := range fields[len(fields)-len(added):] {
			s.log.Info("added column", "table", s.cfg.Table, "column", f.Name, "type", typeOf(f), "version", version)
		}
		return nil
	}
}

// checkTable reports why the sink cannot append to the table of snap:
// a protocol it does not support, other partition columns, or a column
// that does not fit the table's schema (named in the error).
func (s *sink) checkTable(snap *deltalog.Snapshot) error {
	if err := deltalog.CheckWritable(snap.Protocol); err != nil {
		return err
	}
	m := snap.Metadata
	if m.Format.Provider != "" && m.Format.Provider != "parquet" {
		return fmt.Errorf("data format %q, want parquet", m.Format.Provider)
	}
	if mine := s.partitionColumns(); !slices.Equal(m.PartitionColumns, mine) && !(len(m.PartitionColumns) == 0 && len(mine) == 0) {
		return fmt.Errorf("the table is partitioned by [%s], partition_by says [%s]", strings.Join(m.PartitionColumns, ", "), strings.Join(mine, ", "))
	}
	if _, err := deltalog.LogRetention(m); err != nil {
		return fmt.Errorf("delta.logRetentionDuration: %w", err)
	}
	if v, ok := m.Configuration["delta.setTransactionRetentionDuration"]; ok {
		// A snapshot then drops the txn of a partition idle for that long,
		// and its next owner would write again what the table holds.
		return fmt.Errorf("delta.setTransactionRetentionDuration is %q: the txn of a partition idle that long would expire, and its events be written twice; unset it", v)
	}
	tableFields, err := deltalog.ParseSchema(m.SchemaString)
	if err != nil {
		return err
	}
	mine := s.fields()
	for _, f := range mine {
		i := slices.IndexFunc(tableFields, func(t deltalog.StructField) bool { return strings.EqualFold(t.Name, f.Name) })
		switch {
		case i < 0:
			return fmt.Errorf("column %s is not in the table's schema (evolve: true adds it)", f.Name)
		case tableFields[i].Name != f.Name:
			return fmt.Errorf("column %s is %s in the table's schema; name it so", f.Name, tableFields[i].Name)
		case tableFields[i].TypeName() != f.TypeName():
			return fmt.Errorf("column %s is %s in the table's schema, %s in the columns", f.Name, typeOf(tableFields[i]), f.TypeName())
		case !tableFields[i].Nullable && f.Nullable:
			return fmt.Errorf("column %s is not nullable in the table's schema; the mapping makes it nullable", f.Name)
		}
		if _, ok := tableFields[i].Metadata["delta.invariants"]; ok {
			return fmt.Errorf("column %s has an invariant, which this writer does not check", f.Name)
		}
	}
	for _, t := range tableFields {
		if !t.Nullable && !slices.ContainsFunc(mine, func(f deltalog.StructField) bool { return f.Name == t.Name }) {
			return fmt.Errorf("column %s of the table is not nullable and not in the columns", t.Name)
		}
	}
	return nil
}

// partitionColumns are the table's partition columns, by partition_by.
func (s *sink) partitionColumns() []string {
	out := []string{}
	for _, p := range s.parts {
		out = append(out, p.name)
	}
	return out
}

func typeOf(f deltalog.StructField) string {
	if n := f.TypeName(); n != "" {
		return n
	}
	return string(f.Type)
}

// commitInfo is the provenance of a commit, for humans and DESCRIBE
// HISTORY; readers do not need it.
func (s *sink) commitInfo(op string, params map[string]any) map[string]any {
	if params == nil {
		params = map[string]any{}
	}
	build := buildinfo.Get()
	return map[string]any{
		"timestamp": s.now().UnixMilli(), "operation": op, "operationParameters": params,
		"engineInfo": "ehsink/" + build.Version, "isBlindAppend": true,
	}
}

// appID is the partition's txn application id: connector, namespace,
// event hub, consumer group and partition, the identity of an event
// stream that stays the same across restarts and replicas.
func appID(info sinks.Info, partition string) string {
	return strings.Join([]string{"ehsink", info.Connector, info.Namespace, info.EventHub, info.ConsumerGroup, partition}, "/")
}

// offsetApp is the appId of the txn whose version is the offset of the
// last event a partition's commit holds (-1 for an offset that is not a
// number), moved in the same commit as the partition's own txn (app). The
// offset is what a checkpoint needs besides the sequence number: with it
// the runner checkpoints a partition claimed right after a commit that
// was not checkpointed, even if no event comes after. Its prefix is not
// the partitions' ("ehsink/"), so no reader takes it for a watermark.
func offsetApp(app string) string { return "ehsink-offset" + strings.TrimPrefix(app, "ehsink") }

// offsetVersion is the txn version offsetApp's txn holds for offset.
func offsetVersion(offset string) int64 {
	if v, err := strconv.ParseInt(offset, 10, 64); err == nil && v >= 0 {
		return v
	}
	return -1
}

// fileTag names a connector's data files: a short hash of the stream it
// reads (connector, namespace, event hub, consumer group), so that the
// sink removes only its own orphans (vacuum).
func fileTag(info sinks.Info) string {
	h := sha256.Sum256([]byte(appID(info, "")))
	return hex.EncodeToString(h[:6])
}

// vacuum removes the data files of this connector that no version adds
// and no tombstone keeps, older than orphan_age: those of a flush that
// died before its commit (younger ones may belong to a commit in
// flight, of this replica or another). It lists the whole table, so it
// runs once, when the sink starts.
func (s *sink) vacuum(ctx context.Context, snap *deltalog.Snapshot) error {
	files, err := s.store.List(ctx, "")
	if err != nil {
		return err
	}
	prefix := "part-" + s.tag + "-"
	cutoff := s.now().Add(-s.cfg.OrphanAge)
	removed := 0
	for _, f := range files {
		base := path.Base(f.Name)
		if strings.HasPrefix(f.Name, deltalog.Dir) || !strings.HasPrefix(base, prefix) || f.ModTime.After(cutoff) {
			continue
		}
		if _, live := snap.Files[f.Name]; live {
			continue
		}
		if _, kept := snap.Tombstones[f.Name]; kept {
			continue
		}
		if err := s.store.Remove(ctx, f.Name); err != nil {
			return err
		}
		removed++
	}
	if removed > 0 {
		s.log.Info("removed data files no commit took", "files", removed, "older_than", s.cfg.OrphanAge)
	}
	return nil
}

// current returns the newest state of the log the sink has read.
func (s *sink) current() *deltalog.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// Close releases nothing the writers share but marks the sink closed.
// Writers must be closed first. Close is idempotent.
func (s *sink) Close(ctx context.Context) error {
	s.closed.Store(true)
	if s.dl != nil {
		return s.dl.Close(ctx)
	}
	return nil
}

// Open reads the log again and returns the partition's writer and its
// watermark: the version of the partition's txn, the sequence number of
// the last event committed. The sink is authoritative on resume. ctx
// bounds the call only.
func (s *sink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	if s.closed.Load() {
		return nil, nil, sinks.ErrClosed
	}
	s.mu.Lock()
	err := s.dlog.Update(ctx, s.snap)
	snap := s.snap
	var v, off int64
	var ok, hasOff bool
	if err == nil {
		v, ok = snap.TxnVersion(appID(s.info, partition))
		off, hasOff = snap.TxnVersion(offsetApp(appID(s.info, partition)))
	}
	s.mu.Unlock()
	if err != nil {
		return nil, nil, fmt.Errorf("connector %q partition %s: open: table %s: %w", s.info.Connector, partition, s.cfg.Table, err)
	}
	w := &writer{s: s, partition: partition, app: appID(s.info, partition), log: s.log.With("partition", partition)}
	if s.dl != nil {
		dw, _, err := s.dl.Open(ctx, partition)
		if err != nil {
			return nil, nil, err
		}
		w.dl = dw.(*writer)
	}
	if ok {
		w.watermark = &sinks.Position{SequenceNumber: v}
		if hasOff && off >= 0 {
			w.watermark.Offset = strconv.FormatInt(off, 10)
		}
	}
	return w, w.watermark, nil
}

// step runs the test hook at a step of a commit.
func (s *sink) step(name string) error {
	if s.hook == nil {
		return nil
	}
	if err := s.hook(name); err != nil {
		return &commit.StepError{Step: name, Err: err}
	}
	return nil
}

// dataFileName is a new data file's name under its partition folder:
// Spark's part-*.parquet shape with the partition's tag, so that its
// files can be told apart, and a fresh UUID.
func dataFileName(dir, tag, codec string) string {
	return dir + "part-" + tag + "-" + uuid.NewString() + "." + codec + ".parquet"
}
