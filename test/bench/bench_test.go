//go:build linux

package e2e

import (
	"cmp"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/source"
)

// TestMain runs the drain child when the benchmark starts this binary as
// one, and otherwise the benchmark, stopping the PostgreSQL it started.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "drain" {
		os.Exit(drainMain())
	}
	testenv.Main(m)
}

// Defaults of the knobs (environment variables).
const (
	defaultEvents   = 1_000_000 // EVENTS: the backlog, rounded up to a multiple of 4
	defaultDrains   = 3         // DRAINS: raw SDK drains, of which the median is the ceiling
	defaultRawBatch = 5000      // RAW_BATCH: rows per COPY and per merge transaction of the raw baselines
	sourceBatch     = 2000      // the source's default max_events, and its default prefetch at 4 partitions: the raw drain uses them
	pollInterval    = 20 * time.Millisecond
)

// result is one measured run.
type result struct {
	events    int
	elapsed   time.Duration
	cpu       time.Duration // of the measured process, to the last event
	startCPU  time.Duration // of an ehsink run, to its operations API's first answer
	peakRSS   int64
	serverCPU time.Duration // PostgreSQL's, 0 when not measured
	emuCPU    time.Duration // the emulator's over the run
}

func (r result) rate() float64 { return float64(r.events) / r.elapsed.Seconds() }

// BenchmarkE2E is `make bench-e2e`; see the package documentation. It
// runs once (-benchtime 1x) and prints a Markdown table.
func BenchmarkE2E(b *testing.B) {
	per := (envInt(b, "EVENTS", defaultEvents) + partitions - 1) / partitions
	events := per * partitions
	drains := envInt(b, "DRAINS", defaultDrains)
	rawBatch := envInt(b, "RAW_BATCH", defaultRawBatch)
	// RUNS lists the ehsink runs (default append,upsert,parquet,iceberg,delta);
	// SOURCE and CHECKPOINT add settings to their source and checkpoint
	// blocks (the inside of a YAML flow mapping, such as "prefetch:
	// 1000"), ICEBERG lines to the Iceberg sink block (such as
	// "maintenance: {every: 5s}"; with max_rows, it replaces the run's):
	// all to explore settings, not for the reported figures.
	runs := map[string]bool{"append": true, "upsert": true, "parquet": true, "iceberg": true, "delta": true}
	if v := os.Getenv("RUNS"); v != "" {
		runs = map[string]bool{}
		for _, r := range strings.Split(v, ",") {
			runs[r] = true
		}
	}
	sourceYAML := os.Getenv("SOURCE")
	checkpoint := os.Getenv("CHECKPOINT")
	// EHSINK_BENCH_BASE_BIN=PATH[,PATH...] adds each ehsink run made with
	// other binaries (earlier commits', each built in its own worktree)
	// against the same baselines: a before/after of a change in one run,
	// each binary's rows named after its commit. REPEAT=N
	// measures each ehsink run N times, the binaries taking turns, with a
	// raw drain before every turn after the first (counted into the
	// source ceiling), so that a drift of a shared machine's load falls
	// on each row alike; each row is the median of its runs.
	repeat := envInt(b, "REPEAT", 1)
	if b.N != 1 {
		b.Fatalf("b.N = %d: run with -benchtime 1x (one measurement is minutes long)", b.N)
	}
	load := loadAverage()
	bin := buildEhsink(b)
	bins := []binary{{"ehsink", bin}}
	if v := os.Getenv("EHSINK_BENCH_BASE_BIN"); v != "" {
		for _, base := range strings.Split(v, ",") {
			bins = append(bins, binary{"ehsink at " + revision(base), base})
		}
	}
	pg := testenv.Postgres(b)
	pm := postmasterPID(b, pg.DSN())
	emu, conns := startEmulator(b, bin, "orders", "demo")
	pinServers(b, emu.pid(), pm)
	// emulated runs one measurement and adds the emulator's CPU over it:
	// the emulator shares the machine's cores with what is measured.
	emulated := func(run func() result) result {
		c0, _, err := procCPU(emu.pid())
		if err != nil {
			b.Fatal(err)
		}
		r := run()
		c1, _, err := procCPU(emu.pid())
		if err != nil {
			b.Fatal(err)
		}
		r.emuCPU = c1 - c0
		return r
	}

	send := runSend(b, bin, conns[1], events)
	b.Logf("ehsink send --demo --count %d: %.0f events/s, peak RSS %s", events, send.rate(), mib(send.peakRSS))

	bodyBytes := loadBacklog(b, conns[0], per)
	last := lastSequences(b, conns[0])
	counts := map[string]int64{}
	for id, seq := range last {
		if seq != int64(per-1) {
			b.Fatalf("partition %s ends at sequence number %d, want %d (a fresh emulator)", id, seq, per-1)
		}
		counts[id] = seq + 1
	}
	b.Logf("backlog: %d events, %d B of JSON each on average", events, bodyBytes/int64(events))

	// The source ceiling is the raw drain over as many connections as
	// ehsink opens by default; with more than one, the single-connection
	// drain is measured too.
	defConns := source.Settings{}.ConnectionsFor(partitions)
	medianDrain := func(n int) (result, []result) {
		var raws []result
		for range drains {
			raws = append(raws, emulated(func() result { return rawDrain(b, conns[0], counts, events, n) }))
			b.Logf("raw drain, %d connections: %.0f events/s", n, raws[len(raws)-1].rate())
		}
		return median(raws), raws
	}
	_, raws := medianDrain(defConns)
	var single result
	var singles []result
	if defConns > 1 {
		single, singles = medianDrain(1)
	}

	toPostgresWith := func(bin binary, tag, mode, extra string) result {
		dsn := pg.NewDatabase(b)
		sink := fmt.Sprintf("type: postgres\n      dsn: %q\n      table: orders\n      mode: %s\n      create_table: true\n", dsn, mode)
		if mode == "upsert" {
			sink += "      key: [order_id]\n"
		}
		r := emulated(func() result {
			return runEhsink(b, bin.path, tag, conns[0], extra, checkpoint, last, sink+"      columns:"+columnsYAML, pm, events)
		})
		if n := countRows(b, dsn, "orders"); n != events {
			b.Fatalf("%s (%s): the table holds %d rows, want %d", mode, bin.name, n, events)
		}
		// the transactions that wrote the rows: the batches' size on a
		// backlog (append: one per flush; upsert keeps a row's last writer)
		var commits int
		query(b, dsn, `SELECT count(DISTINCT xmin::text) FROM orders`, &commits)
		b.Logf("%s → %s (%s): %.0f events/s, %d commits (%.0f rows each)", bin.name, mode, extra, r.rate(), commits, float64(events)/float64(max(commits, 1)))
		return r
	}
	// turns measures run repeat times with each binary, the binaries
	// taking turns, a raw drain before each turn after the first.
	turns := func(run func(bin binary, tag string) result) []series {
		out := make([]series, len(bins))
		for t := range repeat {
			if t > 0 {
				raws = append(raws, emulated(func() result { return rawDrain(b, conns[0], counts, events, defConns) }))
				b.Logf("raw drain, %d connections: %.0f events/s", defConns, raws[len(raws)-1].rate())
			}
			for i, bin := range bins {
				tag := ""
				if len(bins) > 1 || repeat > 1 {
					tag = fmt.Sprintf("-%s-%d", strings.ReplaceAll(bin.name, " ", "-"), t+1)
				}
				out[i].name = bin.name
				out[i].runs = append(out[i].runs, run(bin, tag))
			}
		}
		return out
	}
	toPostgres := func(mode string) []series {
		return turns(func(bin binary, tag string) result { return toPostgresWith(bin, tag, mode, sourceYAML) })
	}
	// The raw pipelines are the same-machine ceiling of ehsink into
	// PostgreSQL: the drain, encoding/json and the write in one process,
	// sharing the cores with the emulator and the server as ehsink does.
	var copyRes, mergeRes, pipeAppend, pipeUpsert result
	var appendRes, upsertRes, parquetRes, icebergRes, deltaRes []series
	var warehouse string // what the last Iceberg run's warehouse holds
	var deltaLog string  // what the last Delta run's log holds
	if runs["append"] {
		cp := rawCopy(b, pg.NewDatabase(b), pm, per, rawBatch)
		copyRes = result{events: events, elapsed: cp.elapsed, serverCPU: cp.serverCPU}
		b.Logf("raw COPY: %.0f rows/s", copyRes.rate())
		pipeAppend = emulated(func() result { return rawPipeline(b, pg, pm, conns[0], counts, events, defConns, "append") })
		b.Logf("raw pipeline, append: %.0f events/s", pipeAppend.rate())
		appendRes = toPostgres("append")
	}
	if runs["upsert"] {
		mg := rawMerge(b, pg.NewDatabase(b), pm, per, rawBatch)
		mergeRes = result{events: events, elapsed: mg.elapsed, serverCPU: mg.serverCPU}
		b.Logf("raw merge: %.0f rows/s", mergeRes.rate())
		pipeUpsert = emulated(func() result { return rawPipeline(b, pg, pm, conns[0], counts, events, defConns, "upsert") })
		b.Logf("raw pipeline, upsert: %.0f events/s", pipeUpsert.rate())
		upsertRes = toPostgres("upsert")
	}
	// SCALE (a list such as 1,2,4) adds, per number of connections, a raw
	// drain and ehsink into PostgreSQL append with source.connections set.
	type scaled struct {
		n           int
		drain, sink result
	}
	var scale []scaled
	if v := os.Getenv("SCALE"); v != "" {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				b.Fatalf("SCALE=%q: want a list of positive numbers", v)
			}
			sc := scaled{n: n, drain: emulated(func() result { return rawDrain(b, conns[0], counts, events, n) })}
			b.Logf("raw drain, %d connections: %.0f events/s", n, sc.drain.rate())
			extra := fmt.Sprintf("connections: %d", n)
			if sourceYAML != "" {
				extra = sourceYAML + ", " + extra
			}
			sc.sink = toPostgresWith(bins[0], fmt.Sprintf("-connections-%d", n), "append", extra)
			scale = append(scale, sc)
		}
	}
	if runs["parquet"] {
		parquetRes = turns(func(bin binary, tag string) result {
			pq := fmt.Sprintf("type: parquet\n      dir: %q\n      max_rows: %d\n      columns:%s", filepath.Join(b.TempDir(), "parquet"), per, columnsYAML)
			r := emulated(func() result {
				return runEhsink(b, bin.path, tag, conns[0], sourceYAML, checkpoint, last, pq, 0, events)
			})
			b.Logf("%s → parquet: %.0f events/s", bin.name, r.rate())
			return r
		})
	}

	iceExtra := strings.TrimSpace(os.Getenv("ICEBERG"))
	if runs["iceberg"] {
		icebergRes = turns(func(bin binary, tag string) result {
			dir := b.TempDir()
			ice := fmt.Sprintf("type: iceberg\n      catalog: {type: sql, driver: sqlite, uri: %q}\n      namespace: bench\n      table: orders\n      warehouse: {dir: %q}\n",
				filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"))
			if !strings.Contains(iceExtra, "max_rows") {
				ice += fmt.Sprintf("      max_rows: %d\n", per)
			}
			if iceExtra != "" {
				ice += "      " + strings.ReplaceAll(iceExtra, "\n", "\n      ") + "\n"
			}
			r := emulated(func() result {
				return runEhsink(b, bin.path, tag, conns[0], sourceYAML, checkpoint, last, ice+"      columns:"+columnsYAML, 0, events)
			})
			warehouse = warehouseFiles(b, filepath.Join(dir, "warehouse"))
			b.Logf("%s → iceberg: %.0f events/s; the warehouse holds %s", bin.name, r.rate(), warehouse)
			return r
		})
	}

	if runs["delta"] {
		deltaRes = turns(func(bin binary, tag string) result {
			dir := filepath.Join(b.TempDir(), "orders")
			dl := fmt.Sprintf("type: delta\n      table: %q\n      max_rows: %d\n      columns:%s", dir, per, columnsYAML)
			r := emulated(func() result {
				return runEhsink(b, bin.path, tag, conns[0], sourceYAML, checkpoint, last, dl, 0, events)
			})
			deltaLog = deltaLogFiles(b, dir)
			b.Logf("%s → delta: %.0f events/s; the table holds %s", bin.name, r.rate(), deltaLog)
			return r
		})
	}

	// The table.
	drain := median(raws)
	src := drain.rate()
	cpuPer := func(r result) float64 { return float64(r.cpu.Microseconds()) / float64(r.events) }
	srvPer := func(r result) string {
		if r.serverCPU == 0 {
			return "–"
		}
		return fmt.Sprintf("%.1f", float64(r.serverCPU.Microseconds())/float64(r.events))
	}
	emuPer := func(r result) string { return fmt.Sprintf("%.1f", float64(r.emuCPU.Microseconds())/float64(r.events)) }
	rates := func(raws []result) string {
		var s []string
		for _, r := range raws {
			s = append(s, fmt.Sprintf("%.0fk", r.rate()/1000))
		}
		return strings.Join(s, ", ")
	}
	out := &strings.Builder{}
	if sourceYAML != "" || checkpoint != "" {
		fmt.Fprintf(out, "\nSOURCE: %q, CHECKPOINT: %q (not the defaults)", sourceYAML, checkpoint)
	}
	fmt.Fprintf(out, "\nbench-e2e, %s: %d events (%d per partition, %d B of JSON on average), %s, Go %s, load average at start %s\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), events, per, bodyBytes/int64(events), machine(), runtime.Version(), load)
	fmt.Fprintln(out, "| run | events/s | ÷ ceiling | ÷ raw pipeline | CPU µs/event (ehsink: after start) | ÷ raw drain's | PostgreSQL CPU µs/row | emulator CPU µs/event | peak RSS |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Fprintf(out, "| raw SDK drain over %d connections (ehsink's default here): source ceiling (median of %s) | %.0f | 1 | – | %.1f | 1 | – | %s | %s |\n",
		defConns, rates(raws), src, cpuPer(drain), emuPer(drain), mib(drain.peakRSS))
	if defConns > 1 {
		fmt.Fprintf(out, "| raw SDK drain over 1 connection (median of %s) | %.0f | %.2f | – | %.1f | %.2f | – | %s | %s |\n",
			rates(singles), single.rate(), single.rate()/src, cpuPer(single), cpuPer(single)/cpuPer(drain), emuPer(single), mib(single.peakRSS))
	}
	if runs["append"] {
		fmt.Fprintf(out, "| raw pgx.CopyFrom, %d rows per COPY: append ceiling | %.0f | – | – | – | – | %s | – | – |\n", rawBatch, copyRes.rate(), srvPer(copyRes))
	}
	if runs["upsert"] {
		fmt.Fprintf(out, "| raw merge by hand, %d rows per transaction: upsert ceiling | %.0f | – | – | – | – | %s | – | – |\n", rawBatch, mergeRes.rate(), srvPer(mergeRes))
	}
	pipeline := func(name string, r result) {
		if r.events > 0 {
			fmt.Fprintf(out, "| raw pipeline, drain → encoding/json → %s per batch, one process | %.0f | %.2f × source | 1 | %.1f | %.2f | %s | %s | %s |\n",
				name, r.rate(), r.rate()/src, cpuPer(r), cpuPer(r)/cpuPer(drain), srvPer(r), emuPer(r), mib(r.peakRSS))
		}
	}
	pipeline("COPY", pipeAppend)
	pipeline("fenced merge", pipeUpsert)
	row := func(name string, r result, sink float64, ceiling string, pipe result) {
		if r.events == 0 {
			return // not run
		}
		c := min(src, sink)
		if sink >= src {
			ceiling = "source"
		}
		byPipe := "–"
		if pipe.events > 0 {
			byPipe = fmt.Sprintf("%.2f", r.rate()/pipe.rate())
		}
		// The figure after start leaves out what the process spends before
		// it serves (package init, the configuration): about 0.2 s, most
		// of it a dependency's init (iceberg-go's substrait function
		// catalog), which a drain of a few seconds does not pay but a
		// connector running for days pays once.
		steady := float64((r.cpu - r.startCPU).Microseconds()) / float64(r.events)
		fmt.Fprintf(out, "| %s | %.0f | %.2f × %s | %s | %.1f (%.1f) | %.2f (%.2f) | %s | %s | %s |\n",
			name, r.rate(), r.rate()/c, ceiling, byPipe, cpuPer(r), steady, cpuPer(r)/cpuPer(drain), steady/cpuPer(drain), srvPer(r), emuPer(r), mib(r.peakRSS))
	}
	rows := func(to string, ss []series, sink float64, ceiling string, pipe result) {
		for _, s := range ss {
			name := s.name + " run → " + to
			if len(s.runs) > 1 {
				name += " (median of " + rates(s.runs) + ")"
			}
			row(name, median(s.runs), sink, ceiling, pipe)
		}
	}
	rows("PostgreSQL append", appendRes, copyRes.rate(), "COPY", pipeAppend)
	rows("PostgreSQL upsert", upsertRes, mergeRes.rate(), "merge", pipeUpsert)
	rows(fmt.Sprintf("Parquet (max_rows %d)", per), parquetRes, src, "source", result{})
	iceRun := fmt.Sprintf("Iceberg, sql catalog on SQLite (max_rows %d)", per)
	if iceExtra != "" {
		iceRun = fmt.Sprintf("Iceberg, sql catalog on SQLite (ICEBERG=%q)", iceExtra)
	}
	rows(iceRun, icebergRes, src, "source", result{})
	rows(fmt.Sprintf("Delta, local table (max_rows %d)", per), deltaRes, src, "source", result{})
	for _, sc := range scale {
		fmt.Fprintf(out, "| raw SDK drain over %d connections | %.0f | %.2f | – | %.1f | %.2f | – | %s | %s |\n",
			sc.n, sc.drain.rate(), sc.drain.rate()/src, cpuPer(sc.drain), cpuPer(sc.drain)/cpuPer(drain), emuPer(sc.drain), mib(sc.drain.peakRSS))
		sinkCeil := src // COPY not measured (RUNS without append)
		if copyRes.events > 0 {
			sinkCeil = copyRes.rate()
		}
		row(fmt.Sprintf("ehsink run → PostgreSQL append, connections: %d", sc.n), sc.sink, sinkCeil, "COPY", pipeAppend)
	}
	fmt.Fprintf(out, "| ehsink send --demo --count %d | %.0f | – | – | %.1f | – | – | – | %s |\n", events, send.rate(), cpuPer(send), mib(send.peakRSS))
	if warehouse != "" {
		fmt.Fprintf(out, "\nIceberg warehouse after the last Iceberg run: %s\n", warehouse)
	}
	if deltaLog != "" {
		fmt.Fprintf(out, "\nDelta table after the last Delta run: %s\n", deltaLog)
	}
	fmt.Print(out.String())
}

// warehouseFiles counts what an Iceberg warehouse holds: table metadata
// files, manifest lists (one per snapshot kept), manifests and data files.
func warehouseFiles(b *testing.B, dir string) string {
	var meta, lists, manifests, data int
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		switch name := d.Name(); {
		case err != nil || d.IsDir():
			return err
		case strings.HasSuffix(name, ".metadata.json"):
			meta++
		case strings.HasPrefix(name, "snap-") && strings.HasSuffix(name, ".avro"):
			lists++
		case strings.HasSuffix(name, ".avro"):
			manifests++
		case strings.HasSuffix(name, ".parquet"):
			data++
		}
		return nil
	})
	if err != nil {
		b.Fatalf("iceberg warehouse: %v", err)
	}
	return fmt.Sprintf("%d metadata files, %d manifest lists, %d manifests, %d data files", meta, lists, manifests, data)
}

// deltaLogFiles counts what a Delta table holds: commit files,
// checkpoints (and the log's bytes), and data files.
func deltaLogFiles(b *testing.B, dir string) string {
	var commits, checkpoints, data int
	var logBytes int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if strings.Contains(filepath.ToSlash(p), "/_delta_log/") {
			if info, err := d.Info(); err == nil {
				logBytes += info.Size()
			}
		}
		switch {
		case strings.HasSuffix(name, ".checkpoint.parquet"):
			checkpoints++
		case strings.HasSuffix(name, ".json") && strings.Contains(filepath.ToSlash(p), "/_delta_log/"):
			commits++
		case strings.HasSuffix(name, ".parquet"):
			data++
		}
		return nil
	})
	if err != nil {
		b.Fatalf("delta table: %v", err)
	}
	return fmt.Sprintf("%d commit files, %d checkpoints (the log: %d KiB), %d data files", commits, checkpoints, logBytes>>10, data)
}

// binary is an ehsink binary the benchmark runs, named in its rows.
type binary struct{ name, path string }

// series is one ehsink run measured with one binary, once per turn.
type series struct {
	name string
	runs []result
}

// median returns the run of median elapsed time.
func median(rs []result) result {
	sorted := slices.SortedFunc(slices.Values(rs), func(x, y result) int { return cmp.Compare(x.elapsed, y.elapsed) })
	return sorted[len(sorted)/2]
}

// revision names a binary by the commit it was built from (its VCS
// stamp), or by its file name (less an "ehsink-" prefix) when it carries
// none or is not a Go binary (a script that execs one with settings of
// its own, GOGC say).
func revision(path string) string {
	if info, err := buildinfo.ReadFile(path); err == nil {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 7 {
				return s.Value[:7]
			}
		}
	}
	return strings.TrimPrefix(filepath.Base(path), "ehsink-")
}

// rawDrain runs one drain child over conns connections and measures it to
// its last event.
func rawDrain(b *testing.B, conn string, counts map[string]int64, events, conns int, env ...string) result {
	b.Helper()
	c := startDrain(b, conn, counts, sourceBatch, conns, env...)
	if l := c.line(b); l != "done" {
		b.Fatalf("drain child printed %q, want done", l)
	}
	r := result{events: events, elapsed: time.Since(c.start)}
	u := procUsage(b, c.pid())
	r.cpu, r.peakRSS = u.cpu, u.peakRSS
	_ = c.stdin.Close() // the child exits
	c.stop(b, nil)
	return r
}

// rawPipeline runs a pipeline child over conns connections into a new
// database of pg (mode append: raw_append; upsert: raw_upsert, see
// mergeBatch) and measures it to its last commit, with the server's CPU.
func rawPipeline(b *testing.B, pg *testenv.PostgresInstance, postmaster int, conn string, counts map[string]int64, events, conns int, mode string) result {
	b.Helper()
	dsn := pg.NewDatabase(b)
	table := "raw_append"
	if mode == "upsert" {
		createMergeTables(b, dsn)
		table = "raw_upsert"
	} else {
		query(b, dsn, `CREATE TABLE raw_append (`+rowDDL+`)`)
	}
	cpu0 := serverCPU(b, postmaster)
	r := rawDrain(b, conn, counts, events, conns, pipelineEnv+"="+mode, dsnEnv+"="+dsn)
	r.serverCPU = serverCPU(b, postmaster) - cpu0
	if n := countRows(b, dsn, table); n != events {
		b.Fatalf("raw pipeline (%s): %s holds %d rows, want %d", mode, table, n, events)
	}
	return r
}

// runSend runs `ehsink send --demo` to its exit.
func runSend(b *testing.B, bin, conn string, events int) result {
	b.Helper()
	c := startChild(b, nil, bin, "send", "--connection", conn, "--demo", "--count", strconv.Itoa(events))
	if l := c.line(b); !strings.HasPrefix(l, "sent "+strconv.Itoa(events)+" ") {
		b.Fatalf("ehsink send printed %q", l)
	}
	<-c.exited
	r := result{events: events, elapsed: time.Since(c.start)}
	if c.waitErr != nil {
		b.Fatalf("ehsink send: %v\n%s", c.waitErr, c.stderr)
	}
	ru := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	r.peakRSS = ru.Maxrss << 10
	return r
}

// runEhsink runs `ehsink run` with one connector from earliest into sink
// (the YAML of its sink block) and measures it from its start to the
// moment its metrics show every partition's sink watermark at the last
// event (tag is added to its profiles' names); then it stops it with SIGINT and expects exit status 0.
func runEhsink(b *testing.B, bin, tag, conn, source, checkpoint string, last map[string]int64, sink string, postmaster, events int) result {
	b.Helper()
	dir := b.TempDir()
	extraSource, extraCheckpoint := "", ""
	if source != "" {
		extraSource = ", " + source
	}
	if checkpoint != "" {
		extraCheckpoint = ", " + checkpoint
	}
	// PPROF=DIR profiles each ehsink run: its CPU over the first
	// PPROF_SECONDS (default 20) and its heap at the last event, into
	// DIR/NAME.cpu and DIR/NAME.heap (NAME: the sink's type and mode).
	profDir := os.Getenv("PPROF")
	httpBlock := ""
	if profDir != "" {
		httpBlock = "http: {pprof: true}\n"
	}
	cfg := fmt.Sprintf(httpBlock+`connectors:
  - name: bench
    source: {connection: %q, load_balancing: {strategy: greedy}%s}
    checkpoint: {file: {dir: %q}%s}
    errors:
      dead_letter: {dir: %q}
    sink:
      %s
`, conn, extraSource, filepath.Join(dir, "checkpoints"), extraCheckpoint, filepath.Join(dir, "dead-letters"), sink)
	path := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	cpu0 := serverCPU(b, postmaster)
	// LOGS=DIR keeps each ehsink run's log at debug level as DIR/NAME.log:
	// its start's timeline (claims, connections, the sink's opening).
	logDir, level := os.Getenv("LOGS"), "warn"
	if logDir != "" {
		level = "debug"
	}
	c := startChild(b, nil, bin, "run", "-c", path, "--metrics", addr, "--log-level", level)
	// The poll (see watermarks) asks for what it reads uncompressed: a
	// gzip writer per answer, 50 a second, cost ehsink 2-3 % of its CPU.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	deadline := time.Now().Add(30 * time.Minute) // a stall bound, not a measurement
	name := profileName(sink) + tag
	var cpuProf chan []byte
	if profDir != "" {
		cpuProf = make(chan []byte, 1)
		secs := envInt(b, "PPROF_SECONDS", 20)
		go func() {
			for _, up := watermarks(client, addr); !up && time.Now().Before(deadline); _, up = watermarks(client, addr) { // wait for the API
				time.Sleep(pollInterval)
			}
			cpuProf <- fetch(&http.Client{}, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
		}()
	}
	// When the first commit showed (ehsink's start), and when each
	// partition's last event did: a spread says how unevenly they ran.
	var (
		first    time.Duration
		startCPU time.Duration
	)
	ends := map[string]time.Duration{}
	for {
		wms, up := watermarks(client, addr)
		if up && startCPU == 0 {
			startCPU = procUsage(b, c.pid()).cpu
		}
		for p, seq := range wms {
			if first == 0 { // a partition shows a watermark from its first commit on
				first = time.Since(c.start)
			}
			if _, ok := ends[p]; !ok && seq == last[p] {
				ends[p] = time.Since(c.start)
			}
		}
		if len(ends) == len(last) {
			break
		}
		select {
		case <-c.exited:
			b.Fatalf("ehsink run exited before the last event: %v\n%s", c.waitErr, c.stderr)
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			b.Fatalf("ehsink run did not commit the backlog within 30m\n%s", c.stderr)
		}
	}
	r := result{events: events, elapsed: time.Since(c.start), startCPU: startCPU}
	u := procUsage(b, c.pid())
	r.cpu, r.peakRSS = u.cpu, u.peakRSS
	r.serverCPU = serverCPU(b, postmaster) - cpu0
	var at []string
	for _, p := range slices.Sorted(maps.Keys(ends)) {
		at = append(at, fmt.Sprintf("%s %v", p, ends[p].Round(time.Millisecond)))
	}
	b.Logf("%s: %v of CPU to the operations API's first answer (start); first commit seen after %v; each partition's last event after (partition time) %s", name, startCPU.Round(time.Millisecond), first.Round(time.Millisecond), strings.Join(at, ", "))
	if profDir != "" {
		writeRunFile(b, filepath.Join(profDir, name+".heap"), fetch(client, "http://"+addr+"/debug/pprof/heap"))
		// the CPU profile ends when ehsink stops serving
	}
	c.stop(b, syscall.SIGINT)
	if logDir != "" {
		writeRunFile(b, filepath.Join(logDir, name+".log"), c.stderr.Bytes())
	}
	if cpuProf != nil {
		prof := <-cpuProf
		if len(prof) == 0 {
			// pprof answers only at the end of its window, which a run
			// shorter than it never reaches
			b.Logf("%s: no CPU profile: the run ended within PPROF_SECONDS=%d; set it below the run's length", name, envInt(b, "PPROF_SECONDS", 20))
		}
		writeRunFile(b, filepath.Join(profDir, name+".cpu"), prof)
	}
	return r
}

// watermarks returns the sink watermark of each partition of connector
// "bench", from ehsink's status API, and whether it answered. The status
// is what the poll asks for, not /metrics: a Prometheus gather (the
// process collector reads /proc) 50 times a second cost ehsink about 4 %
// of its CPU in a profile, which neither the drain nor a deployment
// scraped every 15 s pays.
func watermarks(client *http.Client, addr string) (map[string]int64, bool) {
	resp, err := client.Get("http://" + addr + "/v1/connectors/bench")
	if err != nil {
		return nil, false // not listening yet
	}
	defer resp.Body.Close()
	var st struct {
		Partitions []struct {
			ID        string `json:"id"`
			Watermark *int64 `json:"watermark"`
		} `json:"partitions"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil {
		return nil, true
	}
	wms := map[string]int64{}
	for _, p := range st.Partitions {
		if p.Watermark != nil {
			wms[p.ID] = *p.Watermark
		}
	}
	return wms, true
}

// profileName names a run's profiles after its sink: type and mode.
func profileName(sink string) string {
	name := strings.TrimPrefix(strings.SplitN(sink, "\n", 2)[0], "type: ")
	if _, mode, ok := strings.Cut(sink, "mode: "); ok {
		name += "-" + strings.SplitN(mode, "\n", 2)[0]
	}
	return name
}

// fetch returns the body of a GET, or nil.
func fetch(client *http.Client, url string) []byte {
	resp, err := client.Get(url)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return data
}

// writeRunFile writes what a run left for a look afterwards (a profile,
// a log) to path, making its directory; an empty one is only reported.
func writeRunFile(b *testing.B, path string, data []byte) {
	b.Helper()
	if len(data) == 0 {
		b.Logf("%s: nothing to write", path)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func envInt(b *testing.B, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.ReplaceAll(v, "_", ""))
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// machine names the CPU and counts the cores.
func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d × %s", runtime.NumCPU(), model)
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
