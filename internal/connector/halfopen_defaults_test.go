package connector_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azeventhubs/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
	"github.com/ehsink/ehsink/internal/faultproxy"
)

// partitionFeed sends one event to every partition of a hub every tick,
// until stopped, and counts what each partition was sent, so that a
// partition whose sink position lags what it was sent is known to be
// unread (the hub is ahead of it).
type partitionFeed struct {
	mu       sync.Mutex // guards sent
	sent     map[string]int
	stopping chan struct{}
	done     chan struct{}
}

// feedPartitions starts a partitionFeed on the hub of conn, with
// partitions partitions, one event per partition every tick.
func feedPartitions(t *testing.T, ctx context.Context, conn string, partitions int, tick time.Duration) *partitionFeed {
	t.Helper()
	producer, err := azeventhubs.NewProducerClientFromConnectionString(conn, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A stop is taken between sends, never inside one: a send cancelled
	// in flight may still have reached the hub, and the count would then
	// be short of what the sink must hold.
	f := &partitionFeed{sent: map[string]int{}, stopping: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer producer.Close(context.Background())
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for n := 0; ; n++ {
			for p := range partitions {
				id := strconv.Itoa(p)
				b, err := producer.NewEventDataBatch(ctx, &azeventhubs.EventDataBatchOptions{PartitionID: &id})
				if err == nil {
					err = b.AddEventData(&azeventhubs.EventData{Body: fmt.Appendf(nil, `{"order_id":"p%s-%d"}`, id, n)}, nil)
				}
				if err == nil {
					err = producer.SendEventDataBatch(ctx, b, nil)
				}
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					t.Errorf("sending to partition %s: %v", id, err)
					return
				}
				f.mu.Lock()
				f.sent[id]++
				f.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-f.stopping:
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(f.close)
	return f
}

// close stops the feed and waits for it.
func (f *partitionFeed) close() {
	select {
	case <-f.stopping:
	default:
		close(f.stopping)
	}
	<-f.done
}

// total returns how many events were sent, over every partition.
func (f *partitionFeed) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.sent {
		n += c
	}
	return n
}

// sentTo returns a copy of how many events each partition was sent.
func (f *partitionFeed) sentTo() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.sent))
	for p, n := range f.sent {
		out[p] = n
	}
	return out
}

// unreadWatch follows, every 100 ms, how far each partition's commits
// (over the replicas' registries) are from what the feed sent it: a
// partition is unread while it lags what it was sent and has not
// committed since. It keeps the longest such stretch, and which
// partition, and who owned it when it began.
type unreadWatch struct {
	feed       *partitionFeed
	regs       []*prometheus.Registry
	since      map[string]time.Time // when the current unread stretch began (zero: read)
	sinceWho   map[string]string    // who owned the partition then
	last       map[string]float64
	longest    time.Duration
	longestP   string
	longestWho string
}

func newUnreadWatch(feed *partitionFeed, regs ...*prometheus.Registry) *unreadWatch {
	return &unreadWatch{feed: feed, regs: regs, since: map[string]time.Time{}, sinceWho: map[string]string{}, last: map[string]float64{}}
}

// look takes one sample; owner says who owned each partition (committed
// metrics name no owner, so the caller reads it from the replicas).
func (w *unreadWatch) look(t *testing.T, now time.Time, owner func(p string) string) {
	t.Helper()
	// read what was sent before what was committed, so that a commit of
	// events sent after the read never makes a partition look behind
	sent := w.feed.sentTo()
	c := committedByPartition(t, w.regs...)
	for p, n := range sent {
		switch {
		case c[p] > w.last[p] || int(c[p]) >= n:
			w.since[p] = time.Time{}
		case w.since[p].IsZero():
			w.since[p], w.sinceWho[p] = now, owner(p)
		}
		w.last[p] = max(w.last[p], c[p])
		if s := w.since[p]; !s.IsZero() && now.Sub(s) > w.longest {
			w.longest, w.longestP, w.longestWho = now.Sub(s), p, w.sinceWho[p]
		}
	}
}

// watchFor samples every 100 ms for d, failing t when a replica's Run
// returns.
func (w *unreadWatch) watchFor(t *testing.T, ctx context.Context, d time.Duration, runs map[string]chan error, owner func(p string) string) {
	t.Helper()
	end := time.Now().Add(d)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for now := time.Now(); now.Before(end); now = time.Now() {
		w.look(t, now, owner)
		for name, done := range runs {
			select {
			case err := <-done:
				t.Fatalf("%s's Run returned %v", name, err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
	}
}

// ownedPartitions returns the partitions each replica's connector drives,
// from its status.
func ownedPartitions(t *testing.T, ctls map[string]*connector.Control) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, ctl := range ctls {
		st, err := ctl.Status("pg")
		if err != nil {
			continue
		}
		for _, p := range st.Partitions {
			out[p.ID] = name
		}
	}
	return out
}

// TestHalfOpenPostgresAtDefaults: replicas A and B share a hub of 8
// partitions, a checkpoint store and a PostgreSQL database, balanced,
// update_interval 2s, ownership_expiration 10s, and nothing else set: no
// errors block, no sink timeouts, no statement_timeout in the DSN. A
// reaches PostgreSQL through a fault proxy, which blackholes it (nothing
// forwarded either way, nothing closed) for 45 s while events flow to
// every partition; B stays healthy. No partition may stay unread (behind
// what it was sent, and not committing) for longer than 2 ×
// ownership_expiration, whoever owns it. After the heal, every event is in
// the table once.
//
//   - blackhole: the path dies between two commits (or in one).
//   - blackhole inside a transaction: the path dies once a flush's BEGIN
//     and fence have been answered, so that A's session holds the
//     watermark row's lock while its client is gone.
func TestHalfOpenPostgresAtDefaults(t *testing.T) {
	const (
		partitions = 8
		expiration = 10 * time.Second
		update     = 2 * time.Second
		cut        = 45 * time.Second
		bound      = 2 * expiration
	)
	for _, tc := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"blackhole", faultproxy.Fault{Blackhole: true}},
		// ReadyForQuery with status T: the server has answered the
		// flush's BEGIN and fence and waits in the transaction.
		{"blackhole inside a transaction", faultproxy.Fault{BlackholeOnReply: []byte("Z\x00\x00\x00\x05T")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // the two faults wait on timers side by side
			ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
			defer cancel()
			_, conn := startHub(t, "orders", partitions)
			dsn, proxied, proxy := proxiedDatabase(t)
			dir := t.TempDir()
			config := func(dsn string) string {
				return `
connectors:
  - name: pg
    source: {connection: "` + conn + `", load_balancing: {strategy: balanced, update_interval: ` + update.String() + `, ownership_expiration: ` + expiration.String() + `}}
    checkpoint: {file: {dir: ` + filepath.Join(dir, "ckpt") + `}}
` + ordersSinkYAML(dsn)
			}
			log := replicaLogs(t)
			feed := feedPartitions(t, ctx, conn, partitions, 100*time.Millisecond)

			regA, regB, ctls, runs, owner, stopA, stopB := startSplitPair(t, ctx, dir, config(proxied), config(dsn), log, partitions)
			ownedByA := ownedPartitions(t, ctls)
			watch := newUnreadWatch(feed, regA, regB)
			watch.watchFor(t, ctx, 3*time.Second, runs, owner) // steady state

			start := time.Now()
			proxy.Set(tc.fault)
			if len(tc.fault.BlackholeOnReply) > 0 {
				select {
				case <-proxy.Triggered():
				case <-ctx.Done():
					t.Fatal("no flush of A opened its transaction")
				}
				t.Logf("A blackholed inside a transaction %s after the fault was armed", time.Since(start).Round(time.Millisecond))
			}
			watch.watchFor(t, ctx, cut, runs, owner)
			t.Logf("%s for %s: longest unread: partition %s (owned by %s when it began), %s (bound %s); A owned %v before; owners at the heal: %v",
				tc.name, cut, watch.longestP, watch.longestWho, watch.longest.Round(100*time.Millisecond), bound, ownedByA, ownedPartitions(t, ctls))
			if watch.longest > bound {
				t.Errorf("partition %s (owned by %s) stayed unread for %s while B was healthy, want at most 2 × ownership_expiration = %s",
					watch.longestP, watch.longestWho, watch.longest.Round(100*time.Millisecond), bound)
			}
			proxy.Heal()
			feed.close()
			total := feed.total()
			waitForRows(t, ctx, runs["A"], dsn, total)
			stopRuns(t, runs, stopA, stopB)
			wantEveryEventOnce(t, ctx, dsn, total)
		})
	}
}

// startSplitPair runs replicas A (configA, its dependencies behind the
// test's fault proxies) and B (configB) of one connector, and waits until
// each owns half of the partitions and every partition has committed. It
// returns their metrics, controls and runs, the owner of a partition now,
// and the stops of A and B.
func startSplitPair(t *testing.T, ctx context.Context, dir, configA, configB string, log *slog.Logger, partitions int) (regA, regB *prometheus.Registry, ctls map[string]*connector.Control, runs map[string]chan error, owner func(string) string, stopA, stopB func()) {
	t.Helper()
	cfgA, regA, metA := loadWithMetrics(t, dir, configA)
	ctlA := connector.NewControl()
	doneA, stopA := runInBackground(ctx, cfgA, connector.RunOptions{Metrics: metA, Control: ctlA, Logger: log.With("replica", "A")})
	t.Cleanup(stopA)
	cfgB, regB, metB := loadWithMetrics(t, t.TempDir(), configB)
	ctlB := connector.NewControl()
	doneB, stopB := runInBackground(ctx, cfgB, connector.RunOptions{Metrics: metB, Control: ctlB, Logger: log.With("replica", "B")})
	t.Cleanup(stopB)
	runs = map[string]chan error{"A": doneA, "B": doneB}
	ctls = map[string]*connector.Control{"A": ctlA, "B": ctlB}
	owner = func(p string) string { return ownedPartitions(t, ctls)[p] }

	waitUntil(t, ctx, doneA, "A and B own half the partitions each and every partition commits", func() bool {
		n := map[string]int{}
		for _, who := range ownedPartitions(t, ctls) {
			n[who]++
		}
		c := committedByPartition(t, regA, regB)
		for p := range partitions {
			if c[strconv.Itoa(p)] == 0 {
				return false
			}
		}
		return n["A"] == partitions/2 && n["B"] == partitions/2
	})
	return regA, regB, ctls, runs, owner, stopA, stopB
}
