package chaos_test

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/jackc/pgx/v5"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
)

// The connectors every replica runs; each reads through its own consumer
// group, and the checks read the hubs through one more.
const (
	connAppend  = "pg-append"
	connUpsert  = "pg-upsert"
	connParquet = "parquet"
	connIceberg = "iceberg"
	connDelta   = "delta"
	connAuto    = "pg-auto" // reads the Avro hub (avro_test.go)
	verifyGroup = "verify"
	hubName     = "orders"
	replicas    = 3
	drain       = 20 * time.Second
)

var connectors = []string{connAppend, connUpsert, connParquet, connIceberg, connDelta, connAuto}

// TestChaos runs the matrix once per load-balancing strategy.
func TestChaos(t *testing.T) {
	if os.Getenv("EHSINK_CHAOS") == "" {
		if os.Getenv("CI") == "true" {
			// CI runs it in a step of its own (make chaos-ci); a CI that
			// reaches it another way runs the short matrix, never skips it.
			t.Setenv("EHSINK_CHAOS", "short")
		} else {
			t.Skip("the chaos matrix runs on demand: make chaos (full), make chaos-short, or EHSINK_CHAOS=short|full; make test runs it (make chaos-ci)")
		}
	}
	k, err := loadKnobs()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range k.balancing {
		t.Run(s, func(t *testing.T) { runMatrix(t, k, s) })
	}
}

// harness is one run of the matrix.
type harness struct {
	t        *testing.T
	k        knobs
	strategy string
	ctx      context.Context
	rnd      *mrand.Rand
	rndMu    sync.Mutex
	runDir   string
	outDir   string
	t0       time.Time
	emu      *emulatorProc
	pg       *testenv.PostgresInstance
	dsn      string
	az       *testenv.AzuriteInstance
	ns       string
	reps     []*replica
	stores   map[string]azeventhubs.CheckpointStore
	parts    []string
	owners   sync.Map // owner ID -> process name
	stopping atomic.Bool

	mu         sync.Mutex // guards the fields below
	faults     []faultRec
	violations []string
	errorLines map[string]int            // "LEVEL connector: msg" -> lines, WARN and ERROR
	msgs       map[string]map[string]int // process -> msg -> lines
	connMsgs   map[string]map[string]int // connector -> msg -> lines
	exits      []string
}

type faultRec struct {
	at      time.Duration
	fault   string
	target  string
	lasted  time.Duration
	outcome string
	bad     bool
}

func (h *harness) record(at time.Time, fault, target string, lasted time.Duration, bad bool, outcome string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, faultRec{at: at.Sub(h.t0), fault: fault, target: target, lasted: lasted, outcome: fmt.Sprintf(outcome, args...), bad: bad})
	if bad {
		h.violations = append(h.violations, fmt.Sprintf("fault %s on %s: %s", fault, target, fmt.Sprintf(outcome, args...)))
	}
}

// fail records a violation; the test fails at the end, after the report.
func (h *harness) fail(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
}

// unexpectedExit notes an exit nobody asked for; they are reported
// together, since a crash loop makes many.
func (h *harness) unexpectedExit(p *proc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.exits = append(h.exits, fmt.Sprintf("%s at %s (%v)", p.name, fmtAt(time.Since(h.t0)), p.err))
}

func (h *harness) intn(n int) int {
	h.rndMu.Lock()
	defer h.rndMu.Unlock()
	return h.rnd.IntN(n)
}

func (h *harness) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(h.intn(int(hi-lo)+1))
}

// sleep waits d or until the run ends; false when the run ended.
func (h *harness) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-h.ctx.Done():
		return false
	}
}

func runMatrix(t *testing.T, k knobs, strategy string) {
	// both acts, the catch-up, and the checks (reading the hub back may take two tries)
	budget := k.duration + 10*time.Second + actLength(k) + k.catchUp + 8*time.Minute
	ctx, cancel := context.WithTimeout(t.Context(), budget)
	defer cancel()
	runDir, err := os.MkdirTemp("", "ehsink-chaos-"+strategy+"-")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, k: k, strategy: strategy, ctx: ctx, runDir: runDir, errorLines: map[string]int{}, msgs: map[string]map[string]int{}, connMsgs: map[string]map[string]int{},
		rnd: mrand.New(mrand.NewPCG(k.seed, 7)), outDir: filepath.Join(runDir, "parquet")}
	t.Cleanup(func() {
		if k.keep || t.Failed() {
			fmt.Printf("run directory (logs, data) kept: %s\n", runDir)
			return
		}
		os.RemoveAll(runDir)
	})
	for i := range k.partitions {
		h.parts = append(h.parts, strconv.Itoa(i))
	}

	h.pg = testenv.NewCrashablePostgres(t)
	h.dsn = h.pg.NewDatabase(t)
	if err := createTables(ctx, h.dsn); err != nil {
		t.Fatal(err)
	}
	h.az = testenv.NewPersistentAzurite(t, filepath.Join(runDir, "azurite"))
	h.emu, err = newEmulator(runDir, k.partitions, append(slicesClone(connectors), verifyGroup))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.emu.start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p := h.emu.current(); p != nil && p.running() {
			p.kill9()
		}
	})
	props, err := azeventhubs.ParseConnectionString(h.emu.conn)
	if err != nil {
		t.Fatal(err)
	}
	h.ns = props.FullyQualifiedNamespace
	if err := h.openStores(ctx); err != nil {
		t.Fatal(err)
	}

	client, err := azeventhubs.NewProducerClientFromConnectionString(h.emu.conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close(context.Background())
	// the producer sends through both acts, and 10 s between them
	prod := &producer{sender: sender{client: client}, partitions: h.parts, perPart: k.events / k.partitions, duration: k.duration + 10*time.Second + h.act2Length(),
		keys: 100, checkRows: k.checkRows, seed: k.seed}
	if h.emu.hubConn(avroHub) == h.emu.conn {
		t.Fatalf("the emulator's connection string %q names no hub %s", h.emu.conn, hubName)
	}
	avroClient, err := azeventhubs.NewProducerClientFromConnectionString(h.emu.hubConn(avroHub), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer avroClient.Close(context.Background())
	aprod, err := newAvroProducer(ctx, h, avroClient, max(1, prod.perPart/avroShare), prod.duration)
	if err != nil {
		t.Fatal(err)
	}

	fmt.Printf("chaos matrix: mode=%s strategy=%s events=%d (+%d Avro, schema v2 from %s) over %s (process and server faults) + %s (network partitions), %d partitions, 3 replicas x (%s), seed=%d, rows PostgreSQL rejects: %v\n",
		k.mode, strategy, prod.perPart*k.partitions, aprod.perPart*k.partitions, fmtAt(aprod.switchAt), k.duration, h.act2Length(), k.partitions, strings.Join(connectors, ", "), k.seed, k.checkRows)

	for i := range replicas {
		r := &replica{h: h, name: fmt.Sprintf("r%d", i+1)}
		if err := h.wire(r); err != nil {
			t.Fatal(err)
		}
		h.reps = append(h.reps, r)
	}
	h.t0 = time.Now()
	for _, r := range h.reps {
		if err := r.start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		h.stopping.Store(true)
		for _, r := range h.reps {
			if p := r.current(); p != nil && p.running() {
				p.kill9()
			}
		}
	})

	prodDone, avroDone := make(chan error, 1), make(chan error, 1)
	go func() { prodDone <- prod.run(ctx) }()
	go func() { avroDone <- aprod.run(ctx) }()
	var faults sync.WaitGroup
	h.scheduleFaults(&faults)
	if err := <-prodDone; err != nil {
		t.Fatalf("producer: %v", err)
	}
	if err := <-avroDone; err != nil {
		t.Fatalf("Avro producer: %v", err)
	}
	producerStopped := time.Now()
	fmt.Printf("producers done at %s: %d events acknowledged, %d failed sends retried; Avro: %d (%d with v2), %d failed sends retried\n",
		fmtAt(producerStopped.Sub(h.t0)), prod.sent, prod.sendErr, aprod.sent, aprod.inV2, aprod.sendErr)
	faults.Wait()
	fmt.Printf("faults done at %s\n", fmtAt(time.Since(h.t0)))

	caught := h.waitCaughtUp(producerStopped)

	// A graceful stop of every replica: each must drain and exit 0.
	h.stopping.Store(true)
	var stops sync.WaitGroup
	for _, r := range h.reps {
		stops.Add(1)
		go func() {
			defer stops.Done()
			r.busy.Lock()
			defer r.busy.Unlock()
			if p := r.current(); p == nil || !p.running() {
				return
			}
			p := r.current()
			exit, took, timedOut := r.termLocked(drain + 15*time.Second)
			switch {
			case exit == -3:
				h.fail("final SIGTERM of %s: it had exited on its own before (%v)", p.name, p.err)
			case exit == -1 && !timedOut && p.started.Add(2*time.Second).After(time.Now()):
				// killed by the signal before its handler was installed: it
				// had just been started by a crash loop, reported as such
			case exit != 0 || timedOut:
				h.fail("final SIGTERM of %s: exit %d after %s (timed out: %v)", p.name, exit, took.Round(time.Millisecond), timedOut)
			}
		}()
	}
	stops.Wait()
	fmt.Printf("replicas stopped at %s\n", fmtAt(time.Since(h.t0)))

	res := h.verify(ctx, prod, aprod)
	if n := len(h.exits); n > 0 {
		h.fail("%d replica exits nobody asked for (each restarted after 1s, as a supervisor would): %s", n, head(h.exits, 10))
	}
	h.report(prod, aprod, caught, res)
	if len(h.violations) > 0 {
		for _, v := range h.violations {
			t.Error(v)
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// openStores opens the checkpoint store of each connector as the replicas
// see it (Blob in Azurite, lowercase names).
func (h *harness) openStores(ctx context.Context) error {
	h.stores = map[string]azeventhubs.CheckpointStore{}
	bs, err := checkpoint.NewBlobStore(ctx, checkpoint.BlobOptions{Connection: secret.String(h.az.ConnectionString()), Container: "chaos-ckpt"})
	if err != nil {
		return err
	}
	for _, c := range connectors {
		h.stores[c] = checkpoint.Lowercase(bs, nil)
	}
	return nil
}

// config is a replica's configuration, reaching PostgreSQL at dsn, Blob
// Storage with az and Event Hubs at ehAddr (its fault proxies). Event
// Hubs is reached through custom_endpoint: the namespace, under which
// leases and checkpoints are kept, stays the emulator's.
func (h *harness) config(dsn, az, ehAddr string) string {
	lb := fmt.Sprintf("{strategy: %s, update_interval: %s, ownership_expiration: %s}", h.strategy, h.k.updateInterval, h.k.expiration)
	src := func(group string) string {
		extra := ""
		if hubOf(group) == avroHub {
			// the registry is reached directly, not through a fault proxy
			extra = fmt.Sprintf("      format: avro\n      registry: {type: azure, group: %s, subject: %s, url: %q, ca_file: %q}\n",
				schemaGroup, schemaName, h.emu.registry, h.emu.caFile)
		}
		return fmt.Sprintf(`    source:
      connection: %q
      custom_endpoint: %s
      consumer_group: %s
%s      start: earliest
      batch: {max_events: 500, max_wait: 500ms}
      load_balancing: %s
    checkpoint:
      blob: {connection: %q, container: chaos-ckpt}
    errors: {retry: {max_backoff: 5s}, sink_timeout: %s}
`, h.emu.hubConn(hubOf(group)), ehAddr, group, extra, lb, az, sinkTimeout)
	}
	cols := `        id: {from: $.id, type: text}
        k: {from: $.k, type: text}
        version: {from: $.v, type: bigint}
        amount: {from: $.amount, type: "numeric(12,2)"}
        part: {from: "@partition", type: text}
        seq: {from: "@sequence_number", type: bigint}
`
	return fmt.Sprintf(`drain_timeout: %s
http: {listen: "127.0.0.1:0", lag_interval: %s}
connectors:
  - name: %s
%s    sink:
      type: postgres
      dsn: %q
      table: public.chaos_append
      mode: append
      columns:
%s  - name: %s
%s    sink:
      type: postgres
      dsn: %q
      table: public.chaos_upsert
      mode: upsert
      key: [k]
      columns:
%s  - name: %s
%s    sink:
      type: parquet
      dir: %s
      max_age: 2s
      max_rows: 5000
      columns:
%s  - name: %s
%s%s  - name: %s
%s%s  - name: %s
%s    sink:
      type: postgres
      dsn: %q
      table: public.%s
      mode: append
      create_table: true
      columns: auto
`, drain, lagInterval, connAppend, src(connAppend), dsn, cols, connUpsert, src(connUpsert), dsn, cols, connParquet, src(connParquet), h.outDir, cols,
		connIceberg, src(connIceberg), h.icebergSink(dsn, cols), connDelta, src(connDelta), h.deltaSink(cols), connAuto, src(connAuto), dsn, autoTable)
}

func createTables(ctx context.Context, dsn string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	// No unique index on (part, seq) in the append table: a duplicate must
	// be counted, not refused.
	_, err = conn.Exec(ctx, `
CREATE TABLE chaos_append (id text NOT NULL, k text NOT NULL, version bigint NOT NULL,
  amount numeric(12,2) NOT NULL CHECK (amount >= 0), part text NOT NULL, seq bigint NOT NULL);
CREATE TABLE chaos_upsert (id text NOT NULL, k text PRIMARY KEY, version bigint NOT NULL,
  amount numeric(12,2) NOT NULL CHECK (amount >= 0), part text NOT NULL, seq bigint NOT NULL,
  _ehsink_partition text NOT NULL, _ehsink_seq bigint NOT NULL)`)
	return err
}

// ownedBy lists, per connector, the partitions whose fresh lease names one
// of the process's owner IDs ("?" when the store cannot be read).
func (h *harness) ownedBy(ctx context.Context, procName string) string {
	var parts []string
	for _, c := range connectors {
		owns, err := h.listOwnership(ctx, c)
		if err != nil {
			parts = append(parts, c+":?")
			continue
		}
		var ids []string
		for _, o := range owns {
			if h.ownerName(o.OwnerID) == procName {
				ids = append(ids, o.PartitionID)
			}
		}
		sortNumeric(ids)
		parts = append(parts, fmt.Sprintf("%s:[%s]", c, strings.Join(ids, " ")))
	}
	return strings.Join(parts, " ")
}

// listOwnership returns the fresh leases of a connector.
func (h *harness) listOwnership(ctx context.Context, conn string) ([]azeventhubs.Ownership, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	owns, err := h.stores[conn].ListOwnership(ctx, h.ns, hubOf(conn), conn, nil)
	if err != nil {
		return nil, err
	}
	var out []azeventhubs.Ownership
	for _, o := range owns {
		if o.OwnerID != "" && time.Since(o.LastModifiedTime) < h.k.expiration {
			out = append(out, o)
		}
	}
	return out, nil
}

func sortNumeric(ids []string) {
	sort.Slice(ids, func(i, j int) bool {
		a, _ := strconv.Atoi(ids[i])
		b, _ := strconv.Atoi(ids[j])
		return a < b
	})
}

func fmtAt(d time.Duration) string {
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("%d:%04.1f", int(d.Minutes()), (d % time.Minute).Seconds())
}
