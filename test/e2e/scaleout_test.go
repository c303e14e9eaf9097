package e2e_test

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/ehsink/ehsink/checkpoint"
	"github.com/ehsink/ehsink/emulator"
	"github.com/ehsink/ehsink/emulator/emulatortest"
	"github.com/ehsink/ehsink/internal/produce"
)

const (
	partitions     = 8
	updateInterval = time.Second
	expiration     = 4 * time.Second
	total          = 6000
)

// replica is one `ehsink run` process.
type replica struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exited
	err  error         // Wait's result
	mu   sync.Mutex
	logs []string
}

func startReplica(t *testing.T, name, cfg string, env ...string) *replica {
	t.Helper()
	r := &replica{name: name, done: make(chan struct{})}
	r.cmd = exec.Command(binary, "run", "-c", cfg, "--log-level", "info")
	r.cmd.Dir = filepath.Dir(cfg)
	if len(env) > 0 {
		r.cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stdout = io.Discard
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			r.mu.Lock()
			r.logs = append(r.logs, sc.Text())
			r.mu.Unlock()
		}
		r.err = r.cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		_ = r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			r.mu.Lock()
			t.Logf("%s logs:\n%s", r.name, strings.Join(r.logs, "\n"))
			r.mu.Unlock()
		}
	})
	return r
}

// ownerships lists who owns what, as the replicas' shared store says.
func ownerships(t *testing.T, ctx context.Context, store azeventhubs.CheckpointStore, ns string) map[string]azeventhubs.Ownership {
	t.Helper()
	owns, err := store.ListOwnership(ctx, ns, "orders", azeventhubs.DefaultConsumerGroup, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	out := map[string]azeventhubs.Ownership{}
	for _, o := range owns {
		if o.OwnerID != "" && now.Sub(o.LastModifiedTime) < expiration {
			out[o.PartitionID] = o
		}
	}
	return out
}

// waitUntil polls cond until it holds; the test fails when ctx ends first.
func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool, replicas ...*replica) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		for _, r := range replicas {
			select {
			case <-r.done:
				t.Fatalf("%s exited (%v) while waiting for %s", r.name, r.err, what)
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-tick.C:
		}
	}
}

type row struct {
	OrderID string `parquet:"order_id"`
	Seq     int64  `parquet:"seq"`
}

// readOutput reads every committed Parquet file under dir.
func readOutput(t *testing.T, dir string) []row {
	t.Helper()
	var rows []row
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".parquet") || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rs, err := parquet.ReadFile[row](path)
		if err != nil {
			return err
		}
		rows = append(rows, rs...)
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return rows
}

// TestTwoProcessesShareAndTakeOver: two `ehsink run` processes share the 8
// partitions of a hub; each owns some within two update intervals; after
// `kill -9` of one, the other owns all 8 within expiration + update
// interval; a third process started after the survivor stopped resumes
// every partition from its checkpoint; the Parquet output then holds every
// event exactly once.
func TestTwoProcessesShareAndTakeOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	srv := emulatortest.Start(t, emulator.Config{Hubs: []emulator.HubConfig{{Name: "orders", Partitions: partitions}}})
	conn := srv.ConnectionString("orders")
	props, err := azeventhubs.ParseConnectionString(conn)
	if err != nil {
		t.Fatal(err)
	}

	work := t.TempDir()
	ckptDir, outDir := filepath.Join(work, "checkpoints"), filepath.Join(work, "out")
	cfg := filepath.Join(work, "connectors.yaml")
	if err := os.WriteFile(cfg, []byte(`
drain_timeout: 20s
connectors:
  - name: orders-pq
    source:
      connection: "`+conn+`"
      start: earliest
      batch: {max_events: 100, max_wait: 200ms}
      load_balancing: {strategy: greedy, update_interval: `+updateInterval.String()+`, ownership_expiration: `+expiration.String()+`}
    checkpoint:
      file: {dir: `+ckptDir+`}
    sink:
      type: parquet
      dir: `+outDir+`
      max_age: 1s
      max_rows: 100
      columns: {order_id: $.order_id, seq: "@sequence_number"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, err := checkpoint.NewFileStore(ckptDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := checkpoint.Lowercase(fs, nil)

	// events keep arriving during the whole test
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close(context.Background())
	produced := make(chan error, 1)
	go func() {
		n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: total, Rate: 400, Keys: 40})
		if err == nil && n != total {
			err = io.ErrShortWrite
		}
		produced <- err
	}()

	a := startReplica(t, "replica A", cfg)
	b := startReplica(t, "replica B", cfg)
	// Time counts from when both are up (their sources checked the hub).
	waitUntil(t, ctx, "both replicas to start their connector", func() bool {
		return logsMention(a, "connector started") && logsMention(b, "connector started")
	}, a, b)
	started := time.Now()
	var bothAt time.Duration
	waitUntil(t, ctx, "both replicas to own partitions", func() bool {
		owners := map[string]int{}
		for _, o := range ownerships(t, ctx, store, props.FullyQualifiedNamespace) {
			owners[o.OwnerID]++
		}
		if len(owners) == 2 {
			bothAt = time.Since(started)
			return true
		}
		return false
	}, a, b)
	t.Logf("both replicas own partitions %s after start", bothAt.Round(time.Millisecond))
	if bothAt > 2*updateInterval {
		t.Errorf("both replicas owned partitions only %s after they started, more than two update intervals", bothAt)
	}

	// Let the balance settle (4 and 4) and some output be committed, then kill A.
	var victim string
	waitUntil(t, ctx, "a 4/4 split and committed output", func() bool {
		owners := map[string][]string{}
		for id, o := range ownerships(t, ctx, store, props.FullyQualifiedNamespace) {
			owners[o.OwnerID] = append(owners[o.OwnerID], id)
		}
		for id, parts := range owners {
			if len(parts) == partitions/2 && len(owners) == 2 {
				victim = id
			}
		}
		return victim != "" && len(readOutput(t, outDir)) > 0
	}, a, b)
	// Which process is the victim? Each replica names its own owner ID when
	// its connector starts (other lines may name the other replica's, as
	// the new owner of a partition it lost).
	killed, survivor := a, b
	if ownerOf(b) == victim {
		killed, survivor = b, a
	} else if ownerOf(a) != victim {
		t.Fatalf("owner %s is neither replica's (%s, %s)", victim, ownerOf(a), ownerOf(b))
	}
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.done
	killedAt := time.Now()
	t.Logf("killed %s (owner %s)", killed.name, victim)

	waitUntil(t, ctx, "the survivor to own all 8 partitions", func() bool {
		owns := ownerships(t, ctx, store, props.FullyQualifiedNamespace)
		if len(owns) != partitions {
			return false
		}
		for _, o := range owns {
			if o.OwnerID == victim {
				return false
			}
		}
		return true
	}, survivor)
	takeover := time.Since(killedAt)
	t.Logf("survivor owns all partitions %s after the kill (expiration %s + update interval %s)", takeover.Round(time.Millisecond), expiration, updateInterval)
	// The bound of the issue, with room for the update interval's jitter
	// (the SDK waits 0.8x to 1.3x of it). The greedy strategy claims every
	// expired partition in one round; the balanced one takes one per round.
	if limit := expiration + 2*updateInterval; takeover > limit {
		t.Errorf("takeover took %s, more than %s", takeover, limit)
	}

	if err := <-produced; err != nil {
		t.Fatalf("producer: %v", err)
	}
	waitUntil(t, ctx, "every event in the output", func() bool {
		return len(distinct(readOutput(t, outDir))) == total
	}, survivor)
	if err := survivor.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-survivor.done
	if survivor.err != nil {
		t.Errorf("%s exited with %v after SIGINT", survivor.name, survivor.err)
	}

	// A restart resumes: every partition starts after its checkpoint (or the
	// sink's watermark), and only the new events are added.
	const more = 200
	c := startReplica(t, "replica C", cfg)
	if n, err := produce.Demo(ctx, producer, produce.DemoOptions{Count: more, Keys: 40}); err != nil || n != more {
		t.Fatalf("producer: %d, %v", n, err)
	}
	waitUntil(t, ctx, "the new events in the output", func() bool {
		return len(distinct(readOutput(t, outDir))) == total+more
	}, c)
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-c.done
	c.mu.Lock()
	starts, resumes := 0, 0
	for _, l := range c.logs {
		if strings.Contains(l, `msg="partition claimed"`) {
			if strings.Contains(l, "after_seq=") {
				resumes++
			} else {
				starts++
			}
		}
	}
	c.mu.Unlock()
	if starts != 0 || resumes != partitions {
		t.Errorf("after the restart %d partitions resumed and %d started from the start position, want %d and 0", resumes, starts, partitions)
	}

	rows := readOutput(t, outDir)
	ids := distinct(rows)
	if len(ids) != total+more {
		t.Errorf("output holds %d distinct orders, want %d", len(ids), total+more)
	}
	if len(rows) != len(ids) {
		var dups []string
		for id, n := range ids {
			if n > 1 {
				dups = append(dups, id)
			}
		}
		slices.Sort(dups)
		t.Errorf("output holds %d rows for %d orders: duplicates %v", len(rows), len(ids), dups[:min(len(dups), 10)])
	}
}

func distinct(rows []row) map[string]int {
	m := map[string]int{}
	for _, r := range rows {
		m[r.OrderID]++
	}
	return m
}

// ownerOf returns the owner ID the replica logged when its connector started.
func ownerOf(r *replica) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if !strings.Contains(l, `msg="connector started"`) {
			continue
		}
		for _, f := range strings.Fields(l) {
			if id, ok := strings.CutPrefix(f, "owner="); ok {
				return id
			}
		}
	}
	return ""
}

func logsMention(r *replica, s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
