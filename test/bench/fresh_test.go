//go:build linux

package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/internal/testenv"
)

// Defaults of BenchmarkFreshness's knobs.
const (
	defaultRates    = "200,2000,20000" // RATES: events/s over the 4 partitions, one after another
	defaultDuration = 15 * time.Second // DURATION: how long each rate is produced
	// sendTick is how often the producer sends what is due: each send is
	// one batch per partition, as a producer with a linger of its own does
	sendTick = 10 * time.Millisecond
)

// freshVariant is one ehsink run of BenchmarkFreshness: a binary and
// settings added to its source block.
type freshVariant struct {
	name, bin, source string
}

// phase is one rate produced: what each partition was sent, by index.
type phase struct {
	rate      int
	first     [partitions]int // index of each partition's first event of the phase
	sent      [partitions]int // events sent to each partition by the end of the phase
	elapsed   time.Duration
	ehsinkCPU time.Duration // ehsink's CPU from the phase's start to its last row
}

// freshness is the latency figures of one phase: the row's commit time
// minus its enqueued time.
type freshness struct {
	events, commits     int
	p50, p95, p99, peak time.Duration
}

// BenchmarkFreshness is `make bench-fresh`: how long an event takes from
// its enqueueing to its row's commit in PostgreSQL (append, default
// settings), while a producer sends at fixed rates (RATES, events/s over
// 4 partitions, each for DURATION). It starts `ehsink emulator` as its
// own process and a PostgreSQL server of its own with
// track_commit_timestamp on: a row's commit time is its transaction's
// (pg_xact_commit_timestamp(xmin)), its enqueued time the one the
// emulator stamped (@enqueued_time), both from this machine's clock.
//
// Each variant runs on a hub of its own, one ehsink process through every
// rate: the defaults; `batch: {min_events: 2000}` (a receive waits for a
// full batch, up to max_wait, as every receive did before min_events); and
// each binary of EHSINK_BENCH_BASE_BIN (an earlier commit's, at its
// defaults). SOURCE replaces the second variant's settings. It prints a
// table of p50/p95/p99/max per variant and rate, with events per commit
// and ehsink's CPU per event.
func BenchmarkFreshness(b *testing.B) {
	if b.N != 1 {
		b.Fatalf("b.N = %d: run with -benchtime 1x", b.N)
	}
	var rates []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("RATES"), defaultRates), ",") {
		r, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || r <= 0 {
			b.Fatalf("RATES=%q: want a list of positive numbers", os.Getenv("RATES"))
		}
		rates = append(rates, r)
	}
	duration := defaultDuration
	if v := os.Getenv("DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			b.Fatalf("DURATION=%q: want a positive duration such as 15s", v)
		}
		duration = d
	}
	load := loadAverage()
	bin := buildEhsink(b)
	variants := []freshVariant{
		{name: "ehsink, defaults", bin: bin},
		{name: "ehsink, min_events: 2000 (the former receive)", bin: bin, source: "batch: {min_events: 2000}"},
	}
	if v := os.Getenv("SOURCE"); v != "" {
		variants[1] = freshVariant{name: fmt.Sprintf("ehsink, %s", v), bin: bin, source: v}
	}
	if v := os.Getenv("EHSINK_BENCH_BASE_BIN"); v != "" {
		for _, base := range strings.Split(v, ",") {
			variants = append(variants, freshVariant{name: "ehsink at " + revision(base) + ", defaults", bin: base})
		}
	}
	var hubs []string
	for i := range variants {
		hubs = append(hubs, fmt.Sprintf("fresh%d", i+1))
	}
	_, conns := startEmulator(b, bin, hubs...)
	pg := commitTimestamps(b)

	type measured struct {
		phase
		freshness
	}
	results := make([][]measured, len(variants))
	for i, v := range variants {
		dsn := pg.NewDatabase(b)
		for _, ph := range runLive(b, v, conns[i], dsn, rates, duration) {
			m := measured{ph, latencies(b, dsn, ph)}
			results[i] = append(results[i], m)
			b.Logf("%s at %d events/s: p50 %s p95 %s p99 %s max %s over %d events, %d commits, ehsink CPU %s µs/event",
				v.name, ph.rate, ms(m.p50), ms(m.p95), ms(m.p99), ms(m.peak), m.events, m.commits, cpuPer(m.ehsinkCPU, m.events))
		}
	}

	out := &strings.Builder{}
	fmt.Fprintf(out, "\nbench-fresh, %s: enqueued → committed (PostgreSQL append, %d partitions, %v per rate, a send per partition every %v), %s, Go %s, load average at start %s\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), partitions, duration, sendTick, machine(), runtime.Version(), load)
	fmt.Fprintln(out, "| run | events/s (produced) | p50 | p95 | p99 | max | events per commit | ehsink CPU µs/event |")
	fmt.Fprintln(out, "|---|---:|---:|---:|---:|---:|---:|---:|")
	for i, v := range variants {
		for _, m := range results[i] {
			fmt.Fprintf(out, "| %s | %d (%.0f) | %s | %s | %s | %s | %.1f | %s |\n", v.name, m.rate, float64(m.events)/m.elapsed.Seconds(),
				ms(m.p50), ms(m.p95), ms(m.p99), ms(m.peak), float64(m.events)/float64(max(m.commits, 1)), cpuPer(m.ehsinkCPU, m.events))
		}
	}
	fmt.Print(out.String())
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func cpuPer(cpu time.Duration, events int) string {
	return fmt.Sprintf("%.1f", float64(cpu.Microseconds())/float64(max(events, 1)))
}

// commitTimestamps starts a PostgreSQL server of the benchmark's own with
// track_commit_timestamp on (a setting read at the server's start).
func commitTimestamps(b *testing.B) *testenv.PostgresInstance {
	b.Helper()
	pg := testenv.NewPostgres(b)
	query(b, pg.DSN(), `ALTER SYSTEM SET track_commit_timestamp = on`)
	if err := pg.Stop(); err != nil {
		b.Fatalf("restarting PostgreSQL with track_commit_timestamp: %v", err)
	}
	if err := pg.Start(); err != nil {
		b.Fatalf("restarting PostgreSQL with track_commit_timestamp: %v", err)
	}
	var on string
	query(b, pg.DSN(), `SHOW track_commit_timestamp`, &on)
	if on != "on" {
		b.Fatalf("track_commit_timestamp is %q after the restart, want on", on)
	}
	return pg
}

// runLive runs `ehsink run` (variant v) from the start of an empty hub
// into the orders table of dsn, then produces each rate for duration and
// waits for its last row before the next; ehsink is stopped at the end.
func runLive(b *testing.B, v freshVariant, conn, dsn string, rates []int, duration time.Duration) []phase {
	b.Helper()
	dir := b.TempDir()
	extra := ""
	if v.source != "" {
		extra = ", " + v.source
	}
	cfg := fmt.Sprintf(`connectors:
  - name: fresh
    source: {connection: %q, load_balancing: {strategy: greedy}%s}
    checkpoint: {file: {dir: %q}}
    errors:
      dead_letter: {dir: %q}
    sink:
      type: postgres
      dsn: %q
      table: orders
      mode: append
      create_table: true
      columns:%s
`, conn, extra, filepath.Join(dir, "checkpoints"), filepath.Join(dir, "dead-letters"), dsn, columnsYAML)
	path := filepath.Join(dir, "connectors.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	addr := freeAddr(b)
	c := startChild(b, nil, v.bin, "run", "-c", path, "--metrics", addr, "--log-level", "warn")
	ctx := context.Background()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer producer.Close(ctx)

	// One event per partition first: every partition claimed, its link
	// attached and the table created before anything is measured.
	var sent [partitions]int
	for p := range partitions {
		if err := sendOrders(ctx, producer, p, 0, 1); err != nil {
			b.Fatal(err)
		}
		sent[p] = 1
	}
	waitRows(b, c, dsn, 1*partitions)

	var phases []phase
	for _, rate := range rates {
		ph := phase{rate: rate, first: sent}
		cpu0, _, err := procCPU(c.pid())
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, partitions)
		for p := range partitions {
			wg.Go(func() { sent[p], errs[p] = produceAt(ctx, producer, p, sent[p], float64(rate)/partitions, duration) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		ph.elapsed = time.Since(start)
		ph.sent = sent
		total := 0
		for _, n := range sent {
			total += n
		}
		waitRows(b, c, dsn, total)
		cpu1, _, err := procCPU(c.pid())
		if err != nil {
			b.Fatal(err)
		}
		ph.ehsinkCPU = cpu1 - cpu0
		phases = append(phases, ph)
	}
	c.stop(b, syscall.SIGINT)
	return phases
}

// produceAt sends orders from index next to partition p at rate events/s
// for duration: every sendTick, one batch of what is due. It returns the
// index after the last order sent.
func produceAt(ctx context.Context, producer *azeventhubs.ProducerClient, p, next int, rate float64, duration time.Duration) (int, error) {
	start, first := time.Now(), next
	tick := time.NewTicker(sendTick)
	defer tick.Stop()
	for {
		elapsed := time.Since(start)
		if elapsed >= duration {
			elapsed = duration
		}
		due := first + int(rate*elapsed.Seconds())
		if due > next {
			if err := sendOrders(ctx, producer, p, next, due-next); err != nil {
				return next, err
			}
			next = due
		}
		if elapsed >= duration {
			return next, nil
		}
		<-tick.C
	}
}

// sendOrders sends n orders of partition p from index i, in as few
// batches as they fit.
func sendOrders(ctx context.Context, producer *azeventhubs.ProducerClient, p, i, n int) error {
	id := strconv.Itoa(p)
	ct := "application/json"
	for n > 0 {
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id})
		if err != nil {
			return fmt.Errorf("partition %s: new batch: %w", id, err)
		}
		for n > 0 {
			body, err := json.Marshal(order(p, i))
			if err != nil {
				return err
			}
			if err := batch.AddEventData(&azeventhubs.EventData{Body: body, ContentType: &ct}, nil); err != nil {
				if batch.NumEvents() == 0 {
					return fmt.Errorf("partition %s: add: %w", id, err)
				}
				break // full: send it, then a new one
			}
			i, n = i+1, n-1
		}
		if err := producer.SendEventDataBatch(ctx, batch, nil); err != nil {
			return fmt.Errorf("partition %s: send: %w", id, err)
		}
	}
	return nil
}

// waitRows waits until the orders table of dsn holds want rows, or fails
// when ehsink exits or a stall bound passes.
func waitRows(b *testing.B, c *child, dsn string, want int) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	deadline := time.Now().Add(readyTimeout) // a stall bound, not a measurement
	for {
		var n int
		// the table is created by ehsink's sink when it opens
		err := conn.QueryRow(ctx, `SELECT count(*) FROM orders`).Scan(&n)
		if err == nil && n >= want {
			return
		}
		select {
		case <-c.exited:
			b.Fatalf("ehsink run exited before %d rows: %v\n%s", want, c.waitErr, c.stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatalf("the orders table holds %d rows (%v), want %d within %v", n, err, want, readyTimeout)
		}
	}
}

// latencies computes the figures of phase ph from the rows of its events.
func latencies(b *testing.B, dsn string, ph phase) freshness {
	b.Helper()
	var cond []string
	for p := range partitions {
		cond = append(cond, fmt.Sprintf("(partition = '%d' AND seq >= %d AND seq < %d)", p, ph.first[p], ph.sent[p]))
	}
	var (
		f                 freshness
		p50, p95, p99, mx float64
	)
	query(b, dsn, `SELECT count(*), count(DISTINCT xmin::text),
		percentile_cont(0.5) WITHIN GROUP (ORDER BY lat), percentile_cont(0.95) WITHIN GROUP (ORDER BY lat),
		percentile_cont(0.99) WITHIN GROUP (ORDER BY lat), max(lat)
		FROM (SELECT xmin, extract(epoch FROM pg_xact_commit_timestamp(xmin) - enqueued_at) AS lat
		      FROM orders WHERE `+strings.Join(cond, " OR ")+`) AS l`, &f.events, &f.commits, &p50, &p95, &p99, &mx)
	want := 0
	for p := range partitions {
		want += ph.sent[p] - ph.first[p]
	}
	if f.events != want {
		b.Fatalf("%d events/s: %d rows, want %d", ph.rate, f.events, want)
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	f.p50, f.p95, f.p99, f.peak = sec(p50), sec(p95), sec(p99), sec(mx)
	return f
}
