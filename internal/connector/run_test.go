package connector

import (
	"context"
	"errors"
	"fmt"
	"github.com/ehsink/ehsink/source"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// runUntil runs cfg with a memory sink until the sink holds want events in
// total, then stops it and returns Run's result.
func runUntil(t *testing.T, cfg *Config, opts RunOptions, sink *sinktest.Memory, partitions []string, want int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, opts) }()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		total := 0
		for _, p := range partitions {
			total += len(sink.Committed(p))
		}
		if total >= want {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned early with %d/%d events: %v", total, want, err)
		case <-deadline.C:
			t.Fatalf("only %d/%d events committed after 2m", total, want)
		case <-tick.C:
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// TestRunEndToEnd runs a connector against the in-process emulator with its
// demo producer, stops it, runs it again, and checks that every event was
// written once, in order, and that the checkpoints match the sink.
func TestRunEndToEnd(t *testing.T) {
	dir := t.TempDir()
	sink := sinktest.NewMemory()
	sink.SetFencing(false) // a duplicate from the pipeline must show
	var reg sinks.Registry
	reg.Register("memory", sink.Driver())
	partitions := []string{"0", "1", "2", "3"}
	cfg := &Config{
		DrainTimeout: 10 * time.Second,
		Emulator: &EmulatorSpec{
			Hubs:    map[string]int{"orders": 4},
			DataDir: filepath.Join(dir, "emulator"),
			Demo:    &DemoSpec{Count: 1500, Rate: 1e6, Keys: 50},
		},
		Connectors: []Spec{{
			Name:       "orders",
			Source:     SourceSpec{Connection: "emulator", EventHub: "orders", Settings: source.Settings{Start: "earliest", Batch: source.Batch{MaxEvents: 100, MaxWait: 200 * time.Millisecond}, LoadBalancing: source.LoadBalancing{UpdateInterval: time.Second, OwnershipExpiration: 5 * time.Second}}},
			Checkpoint: CheckpointSpec{File: &FileCheckpointSpec{Dir: filepath.Join(dir, "checkpoints")}},
			Sink:       SinkSpec{Type: "memory"},
			Errors:     ErrorsSpec{DeadLetter: DeadLetterSpec{Dir: filepath.Join(dir, "dead")}},
		}},
	}
	promReg := prometheus.NewRegistry()
	met, err := NewMetrics(promReg)
	if err != nil {
		t.Fatal(err)
	}
	opts := RunOptions{Registry: &reg, Metrics: met, DevEnv: testDevEnv{}}
	runUntil(t, cfg, opts, sink, partitions, 1500)
	// Second run: the emulator serves the same 1,500 events from its data
	// dir plus 1,500 new ones; nothing committed is written again.
	runUntil(t, cfg, opts, sink, partitions, 3000)
	committed := 0.0
	for _, p := range partitions {
		committed += testutil.ToFloat64(met.written.WithLabelValues("orders", p))
	}
	if committed != 3000 {
		t.Errorf("ehsink_events_committed_total sums to %v, want 3000", committed)
	}

	store, err := checkpoint.NewFileStore(filepath.Join(dir, "checkpoints"), nil)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range partitions {
		got := sink.Committed(p)
		total += len(got)
		for i, seq := range got {
			if seq != int64(i) {
				t.Fatalf("partition %s: position %d holds seq %d (duplicate or gap): %v", p, i, seq, got[:min(len(got), 20)])
			}
		}
	}
	if total != 3000 {
		t.Fatalf("%d events written, want 3000", total)
	}
	// Every committed partition's checkpoint equals the sink's watermark.
	all, err := listAllCheckpoints(store)
	if err != nil {
		out, _ := exec.Command("find", store.Dir()).CombinedOutput()
		t.Fatalf("%v\n%s", err, out)
	}
	for _, p := range partitions {
		got := sink.Committed(p)
		if len(got) == 0 {
			continue
		}
		seq, ok := all[p]
		if !ok || seq != got[len(got)-1] {
			t.Errorf("partition %s: checkpoint %d (found %v), sink holds up to %d", p, seq, ok, got[len(got)-1])
		}
	}
}

// listAllCheckpoints reads every checkpoint under a file store, whatever the
// namespace it was written under, keyed by partition.
func listAllCheckpoints(store *checkpoint.FileStore) (map[string]int64, error) {
	out := map[string]int64{}
	// The emulator's port changes every run; its state is kept under the
	// stable alias, in the lowercase names the other Azure SDKs use.
	ns := EmulatorNamespace
	cps, err := store.ListCheckpoints(context.Background(), ns, "orders", "$default", nil)
	if err != nil {
		return nil, err
	}
	for _, cp := range cps {
		if cp.SequenceNumber != nil {
			out[cp.PartitionID] = *cp.SequenceNumber
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no checkpoints listed for namespace %s", ns)
	}
	return out, nil
}

// refusingDriver builds no sink: its New fails for good, as a sink whose
// table does not match or whose credentials are refused does.
type refusingDriver struct{}

func (refusingDriver) NewConfig() any { return &struct{}{} }

func (refusingDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return nil, errors.New(`table "orders" has no column "amount"`)
}

// TestRunIsolatesAPermanentFailure: of two connectors in one process, one
// fails for good at start. The other one serves every event; the failure
// is reported (health check, state metric) and returned by Run, naming the
// connector, when the process stops.
func TestRunIsolatesAPermanentFailure(t *testing.T) {
	dir := t.TempDir()
	sink := sinktest.NewMemory()
	var reg sinks.Registry
	reg.Register("memory", sink.Driver())
	reg.Register("refusing", refusingDriver{})
	src := SourceSpec{Connection: "emulator", EventHub: "orders", Settings: source.Settings{Start: "earliest", Batch: source.Batch{MaxEvents: 100, MaxWait: 200 * time.Millisecond}, LoadBalancing: source.LoadBalancing{Strategy: "greedy", UpdateInterval: time.Second, OwnershipExpiration: 5 * time.Second}}}
	cfg := &Config{
		DrainTimeout: 10 * time.Second,
		Emulator:     &EmulatorSpec{Hubs: map[string]int{"orders": 2}, Demo: &DemoSpec{Count: 300, Rate: 1e6, Keys: 10}},
		Connectors: []Spec{
			{Name: "broken", Source: src, Sink: SinkSpec{Type: "refusing"},
				Checkpoint: CheckpointSpec{File: &FileCheckpointSpec{Dir: filepath.Join(dir, "ckpt-broken")}}},
			{Name: "healthy", Source: src, Sink: SinkSpec{Type: "memory"},
				Checkpoint: CheckpointSpec{File: &FileCheckpointSpec{Dir: filepath.Join(dir, "ckpt-healthy")}},
				Errors:     ErrorsSpec{DeadLetter: DeadLetterSpec{Dir: filepath.Join(dir, "dead")}}},
		},
	}
	met, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- Run(runCtx, cfg, RunOptions{Registry: &reg, Metrics: met, DevEnv: testDevEnv{}}) }()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for len(sink.Committed("0"))+len(sink.Committed("1")) < 300 {
		select {
		case err := <-done:
			t.Fatalf("Run returned while the healthy connector had not served every event: %v", err)
		case <-ctx.Done():
			t.Fatal("the healthy connector did not serve every event")
		case <-tick.C:
		}
	}
	if got := met.Failed(); !slices.Equal(got, []string{"broken"}) {
		t.Errorf("Failed() = %v, want [broken]", got)
	}
	if v := testutil.ToFloat64(met.state.WithLabelValues("healthy", stateRunning)); v != 1 {
		t.Errorf("healthy connector state running = %v, want 1", v)
	}
	stop()
	err = <-done
	if err == nil || !strings.Contains(err.Error(), `connector "broken"`) || !strings.Contains(err.Error(), "no column") {
		t.Fatalf("Run = %v, want the broken connector's failure", err)
	}
	if strings.Contains(err.Error(), "healthy") {
		t.Errorf("Run = %v: the healthy connector did not fail", err)
	}
}

// countingSink counts the writers opened and closed per partition.
type countingSink struct {
	sinks.Sink
	mu     sync.Mutex
	opens  map[string]int
	closes map[string]int
}

type countingWriter struct {
	sinks.Writer
	s         *countingSink
	partition string
}

func (c *countingSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := c.Sink.Open(ctx, partition)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.opens[partition]++
	c.mu.Unlock()
	return countingWriter{w, c, partition}, wm, nil
}

func (w countingWriter) Close(ctx context.Context) error {
	w.s.mu.Lock()
	w.s.closes[w.partition]++
	w.s.mu.Unlock()
	return w.Writer.Close(ctx)
}

type countingDriver struct{ s *countingSink }

func (d countingDriver) NewConfig() any { return &struct{}{} }
func (d countingDriver) New(context.Context, any, sinks.Info) (sinks.Sink, error) {
	return d.s, nil
}

// TestRunOpensSinkOncePerClaim: the writer that reports the watermark a
// claimed partition resumes from is the one that runs it, so one replica
// that claims each partition once opens each partition's writer once, and
// closes it.
func TestRunOpensSinkOncePerClaim(t *testing.T) {
	dir := t.TempDir()
	mem := sinktest.NewMemory()
	counting := &countingSink{Sink: mem, opens: map[string]int{}, closes: map[string]int{}}
	var reg sinks.Registry
	reg.Register("counting", countingDriver{counting})
	partitions := []string{"0", "1", "2", "3"}
	cfg := &Config{
		DrainTimeout: 10 * time.Second,
		Emulator: &EmulatorSpec{
			Hubs:    map[string]int{"orders": 4},
			DataDir: filepath.Join(dir, "emulator"),
			Demo:    &DemoSpec{Count: 400, Rate: 1e6, Keys: 50},
		},
		Connectors: []Spec{{
			Name:       "orders",
			Source:     SourceSpec{Connection: "emulator", EventHub: "orders", Settings: source.Settings{Start: "earliest", Batch: source.Batch{MaxEvents: 100, MaxWait: 200 * time.Millisecond}, LoadBalancing: source.LoadBalancing{Strategy: "greedy", UpdateInterval: time.Second, OwnershipExpiration: 5 * time.Second}}},
			Checkpoint: CheckpointSpec{File: &FileCheckpointSpec{Dir: filepath.Join(dir, "checkpoints")}},
			Sink:       SinkSpec{Type: "counting"},
			Errors:     ErrorsSpec{DeadLetter: DeadLetterSpec{Dir: filepath.Join(dir, "dead")}},
		}},
	}
	runUntil(t, cfg, RunOptions{Registry: &reg, DevEnv: testDevEnv{}}, mem, partitions, 400)
	counting.mu.Lock()
	defer counting.mu.Unlock()
	for _, p := range partitions {
		if counting.opens[p] != 1 || counting.closes[p] != 1 {
			t.Errorf("partition %s: %d writers opened, %d closed; want 1 and 1 (one claim)", p, counting.opens[p], counting.closes[p])
		}
	}
}
