//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/secret"
	"github.com/ehsink/ehsink/internal/testenv"
	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/source"
)

// BenchmarkBalance measures what a production deployment meets when its
// replicas share many partitions, at the default load-balancing settings
// (balanced, update_interval 10 s, ownership_expiration 1 m) and the
// connector's own checkpoint store stack on Azurite:
//
//   - lone: one replica's start to its owning every partition;
//   - balanced: the other replicas started STAGGER apart, from the last
//     start to every partition owned once with each replica within one of
//     its fair share;
//   - steady: over STEADY, the ownership changes (none wanted) and the
//     Blob requests per partition-hour by operation, leases renewed and
//     checkpoints written as the connector does (one per partition per
//     checkpoint.every_interval, each with its lease read);
//   - failover: one replica killed (its store refuses everything from that
//     instant, so its leases are neither renewed nor released, as with
//     kill -9), to every one of its partitions owned again;
//   - grown: the hub given an eighth more partitions (up to 1,024) while
//     the survivors run, to every partition owned and balanced again.
//
// SHAPES lists partitions x replicas (default 32x3,100x3,1024x3,1024x10).
// STORE=file keeps leases and checkpoints in the local file store instead
// (no request counts): Azurite on a two-core machine does not keep up with
// 1,024 partitions' leases and checkpoints, which Blob Storage does.
// Replicas run in this process, each with its own Event Hubs connection
// and store; the heap figure is the process's (emulator included) over
// the replicas.
func BenchmarkBalance(b *testing.B) {
	shapes := os.Getenv("SHAPES")
	if shapes == "" {
		shapes = "32x3,100x3,1024x3,1024x10"
	}
	stagger := envDuration(b, "STAGGER", 2*time.Second)
	steady := envDuration(b, "STEADY", time.Minute)
	fmt.Printf("machine: %s, load %s; defaults: balanced, update_interval 10s, ownership_expiration 1m, checkpoint every 20s\n", machine(), loadAverage())
	fmt.Printf("%-6s %-8s %-9s %-10s %-10s %-9s %-8s %-13s %-9s %-11s %s\n", "parts", "replicas", "lone", "balanced", "failover", "grown", "moves", "req/part-h", "$/part-mo", "heap/repl", "by operation")
	for _, shape := range strings.Split(shapes, ",") {
		p, r, ok := strings.Cut(strings.TrimSpace(shape), "x")
		parts, err1 := strconv.Atoi(p)
		replicas, err2 := strconv.Atoi(r)
		if !ok || err1 != nil || err2 != nil || parts < 1 || replicas < 2 {
			b.Fatalf("SHAPES: %q is not PARTITIONSxREPLICAS (at least 2 replicas)", shape)
		}
		balanceShape(b, parts, replicas, stagger, steady)
	}
}

// replica is one source with the partitions it runs and its store's
// request counts.
type replica struct {
	name   string
	dead   atomic.Bool
	mu     sync.Mutex
	owned  map[string]bool
	moves  int // partitions started or ended
	ops    map[string]int
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *replica) count(op string) { r.mu.Lock(); r.ops[op]++; r.mu.Unlock() }

func (r *replica) snapshot() (owned map[string]bool, moves int, ops map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	owned = make(map[string]bool, len(r.owned))
	for id := range r.owned {
		owned[id] = true
	}
	ops = make(map[string]int, len(r.ops))
	for k, v := range r.ops {
		ops[k] = v
	}
	return owned, r.moves, ops
}

func (r *replica) reset() { r.mu.Lock(); r.moves, r.ops = 0, map[string]int{}; r.mu.Unlock() }

// killable refuses every call once its replica is dead.
type killable struct {
	azeventhubs.CheckpointStore
	r *replica
}

var errKilled = errors.New("replica killed")

func (k killable) ClaimOwnership(ctx context.Context, o []azeventhubs.Ownership, opts *azeventhubs.ClaimOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if k.r.dead.Load() {
		return nil, errKilled
	}
	return k.CheckpointStore.ClaimOwnership(ctx, o, opts)
}

func (k killable) ListOwnership(ctx context.Context, ns, hub, cg string, opts *azeventhubs.ListOwnershipOptions) ([]azeventhubs.Ownership, error) {
	if k.r.dead.Load() {
		return nil, errKilled
	}
	return k.CheckpointStore.ListOwnership(ctx, ns, hub, cg, opts)
}

func (k killable) SetCheckpoint(ctx context.Context, cp azeventhubs.Checkpoint, opts *azeventhubs.SetCheckpointOptions) error {
	if k.r.dead.Load() {
		return errKilled
	}
	return k.CheckpointStore.SetCheckpoint(ctx, cp, opts)
}

// Lease reads one lease as the store under it does (the lease read before
// each checkpoint), refusing once the replica is dead.
func (k killable) Lease(ctx context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error) {
	if k.r.dead.Load() {
		return azeventhubs.Ownership{}, false, errKilled
	}
	lr, ok := k.CheckpointStore.(interface {
		Lease(ctx context.Context, ns, hub, group, partition string) (azeventhubs.Ownership, bool, error)
	})
	if !ok {
		return azeventhubs.Ownership{}, false, errors.ErrUnsupported
	}
	return lr.Lease(ctx, ns, hub, group, partition)
}

func balanceShape(b *testing.B, parts, replicas int, stagger, steady time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := emulator.Start(ctx, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: parts}}})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	// one event per partition, which each owner checkpoints (a
	// checkpoint must name an event the partition holds)
	producer, err := azeventhubs.NewProducerClientFromConnectionString(srv.ConnectionString("orders"), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range parts {
		id := strconv.Itoa(i)
		batch, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id})
		if err == nil {
			err = batch.AddEventData(&azeventhubs.EventData{Body: []byte("{}")}, nil)
		}
		if err == nil {
			err = producer.SendEventDataBatch(ctx, batch, nil)
		}
		if err != nil {
			b.Fatalf("sending to partition %s: %v", id, err)
		}
	}
	_ = producer.Close(ctx)
	var spec connector.CheckpointSpec
	if os.Getenv("STORE") == "file" {
		spec.File = &connector.FileCheckpointSpec{Dir: b.TempDir()}
	} else {
		az := testenv.Azurite(b)
		spec.Blob = &connector.BlobCheckpointSpec{Connection: secret.String(az.ConnectionString()), Container: az.ContainerName(b)}
	}
	const ckptEvery = 20 * time.Second

	var all []*replica
	start := func(i int) *replica {
		r := &replica{name: fmt.Sprintf("replica-%02d", i), owned: map[string]bool{}, ops: map[string]int{}, done: make(chan struct{})}
		store, err := connector.NewCheckpointStore(ctx, spec, nil, r.count)
		if err != nil {
			b.Fatal(err)
		}
		// as the connector keeps an emulator's state: under a namespace
		// without the port (a namespace with one also gets a checkpoint
		// copy for the JavaScript SDK, which real namespaces never need)
		store = checkpoint.AliasNamespace(store, srv.Addr(), connector.EmulatorNamespace)
		src, err := source.New(ctx, source.Options{Connection: secret.String(srv.ConnectionString("orders")), Store: killable{store, r}, InstanceID: r.name})
		if err != nil {
			b.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		r.cancel = stop
		go func() {
			defer close(r.done)
			defer func() { _ = src.Close(context.Background()) }()
			err := src.Run(rctx, func(ctx context.Context, p *source.Partition) error {
				r.mu.Lock()
				r.owned[p.ID()] = true
				r.moves++
				r.mu.Unlock()
				defer func() { r.mu.Lock(); delete(r.owned, p.ID()); r.moves++; r.mu.Unlock() }()
				// what the connector's checkpoints cost: one per
				// every_interval, each after a lease read
				// a random phase, as the connector's runner gives each partition
				last := time.Now().Add(-rand.N(ckptEvery))
				var pos *sinks.Position
				for ctx.Err() == nil {
					batch, err := p.Receive(ctx)
					if err != nil {
						return err
					}
					if len(batch) > 0 {
						at := batch[len(batch)-1].Position()
						pos = &at
					}
					if pos != nil && time.Since(last) >= ckptEvery {
						last = time.Now()
						// as the connector does: a failed checkpoint is
						// tried again later, a lost partition ends
						if err := p.Checkpoint(ctx, *pos); errors.Is(err, source.ErrOwnershipLost) {
							return err
						}
					}
				}
				return nil
			})
			if err != nil && rctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "  %s stopped: %v\n", r.name, err)
			}
		}()
		all = append(all, r)
		return r
	}
	defer func() {
		for _, r := range all {
			r.cancel()
			<-r.done
		}
	}()

	// balanced reports whether reps own every partition once, each within
	// one of its fair share.
	balanced := func(reps []*replica) bool {
		seen := map[string]bool{}
		lo, hi := parts, 0
		for _, r := range reps {
			owned, _, _ := r.snapshot()
			for id := range owned {
				if seen[id] {
					return false
				}
				seen[id] = true
			}
			lo, hi = min(lo, len(owned)), max(hi, len(owned))
		}
		return len(seen) == parts && hi-lo <= 1
	}
	wait := func(what string, limit time.Duration, cond func() bool) time.Duration {
		began, told := time.Now(), time.Now()
		for !cond() {
			if time.Since(began) > limit {
				b.Fatalf("%d partitions, %d replicas: %s not reached in %s", parts, replicas, what, limit)
			}
			if time.Since(told) > 10*time.Second {
				told = time.Now()
				var counts []string
				for _, r := range all {
					owned, _, _ := r.snapshot()
					counts = append(counts, strconv.Itoa(len(owned)))
				}
				fmt.Fprintf(os.Stderr, "  waiting for %s, %s: owned %s\n", what, time.Since(began).Round(time.Second), strings.Join(counts, "/"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(began)
	}

	first := start(0)
	lone := wait("a lone replica owning every partition", 10*time.Minute, func() bool { return balanced([]*replica{first}) })
	for i := 1; i < replicas; i++ {
		time.Sleep(stagger)
		start(i)
	}
	balance := wait("balance", 10*time.Minute, func() bool { return balanced(all) })

	// past every partition's first checkpoint (a blob created), so that
	// the window holds what a partition costs from then on
	time.Sleep(ckptEvery + 5*time.Second)
	for _, r := range all {
		r.reset()
	}
	time.Sleep(steady)
	moves, ops := 0, map[string]int{}
	var heap runtime.MemStats
	runtime.ReadMemStats(&heap)
	for _, r := range all {
		_, m, o := r.snapshot()
		moves += m
		for k, v := range o {
			ops[k] += v
		}
	}
	counted := parts // the partitions the steady window's requests are shared over
	perHour := func(n int) float64 { return float64(n) / float64(counted) / steady.Hours() }
	total, billed := 0, 0.0
	var byOp []string
	for op, n := range ops {
		total += n
		// hot tier list prices: writes and lists $0.065, reads $0.005 per 10,000
		price := 0.065
		if op == "get" {
			price = 0.005
		}
		billed += perHour(n) * 730 * price / 10000
		byOp = append(byOp, fmt.Sprintf("%s %.0f", op, perHour(n)))
	}
	sort.Strings(byOp)

	dead := all[len(all)-1]
	lost, _, _ := dead.snapshot()
	dead.dead.Store(true)
	killed := time.Now()
	dead.cancel()
	survivors := all[:len(all)-1]
	wait("failover", 10*time.Minute, func() bool {
		seen := map[string]bool{}
		for _, r := range survivors {
			owned, _, _ := r.snapshot()
			for id := range owned {
				seen[id] = true
			}
		}
		for id := range lost {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	failover := time.Since(killed)

	// the hub grows by an eighth (Premium and Dedicated allow it): the
	// survivors own and balance the new partitions too
	grown := "-"
	if more := min(parts+max(1, parts/8), 1024); more > parts {
		if err := srv.AddPartitions("orders", more); err != nil {
			b.Fatal(err)
		}
		added := time.Now()
		parts = more
		wait("the added partitions", 10*time.Minute, func() bool { return balanced(survivors) })
		grown = time.Since(added).Round(100 * time.Millisecond).String()
	}
	fmt.Printf("%-6d %-8d %-9s %-10s %-10s %-9s %-8d %-13.0f %-9.2f %-11s %s\n", counted, replicas, lone.Round(100*time.Millisecond), balance.Round(100*time.Millisecond),
		failover.Round(100*time.Millisecond), grown, moves, perHour(total), billed, mib(int64(heap.HeapInuse)/int64(replicas)), strings.Join(byOp, ", "))
}

func envDuration(b *testing.B, name string, def time.Duration) time.Duration {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
