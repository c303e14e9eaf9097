package connector_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ehsink/ehsink/internal/faultproxy"
	"github.com/ehsink/ehsink/internal/testenv"
)

// TestSlowPostgresAtDefaults: replicas A and B share a hub of 8
// partitions, a checkpoint store and a PostgreSQL database, balanced,
// update_interval 2s, ownership_expiration 10s, and nothing else set, so
// errors.sink_timeout is its default, 2.5s. A reaches PostgreSQL through a
// fault proxy that delays every chunk in each direction (a database in
// another region) for 25 s while events flow to every partition. A flush
// then takes several round trips, longer than sink_timeout in all, but
// the server answers each: a slow sink, not a dead one. A's breaker must
// never open, no replica may log an ERROR line, no partition may stay
// unread for longer than 2 × ownership_expiration, and every event ends
// up in the table once.
func TestSlowPostgresAtDefaults(t *testing.T) {
	const (
		partitions = 8
		expiration = 10 * time.Second
		update     = 2 * time.Second
		slow       = 25 * time.Second
		bound      = 2 * expiration
	)
	for _, latency := range []time.Duration{300 * time.Millisecond, time.Second} {
		t.Run(latency.String(), func(t *testing.T) {
			t.Parallel() // the two latencies wait on timers side by side
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
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
			logs := &testenv.LogBuffer{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("logs:\n%s", logs.String())
				}
			})
			log := slog.New(slog.NewTextHandler(logs, nil))
			feed := feedPartitions(t, ctx, conn, partitions, 100*time.Millisecond)

			regA, regB, ctls, runs, owner, stopA, stopB := startSplitPair(t, ctx, dir, config(proxied), config(dsn), log, partitions)
			ownedByA := ownedPartitions(t, ctls)
			before := committedByPartition(t, regA)
			proxy.Set(faultproxy.Fault{Latency: latency})

			// The watch samples the breaker as well; its ERROR line, checked
			// below, records an opening that a sample could miss.
			watch := newUnreadWatch(feed, regA, regB)
			opened := false
			watch.watchFor(t, ctx, slow, runs, func(p string) string {
				opened = opened || sumMetric(t, regA, "ehsink_circuit_breaker_state", "pg") != 0
				return owner(p)
			})
			after := committedByPartition(t, regA)
			t.Logf("+%s each way for %s: longest unread: partition %s (owned by %s when it began), %s (bound %s); A owned %v before, %v now; A committed %v before, %v after",
				latency, slow, watch.longestP, watch.longestWho, watch.longest.Round(100*time.Millisecond), bound, ownedByA, ownedPartitions(t, ctls), before, after)
			if opened {
				t.Errorf("A's circuit breaker opened over a path %s slower each way", latency)
			}
			if watch.longest > bound {
				t.Errorf("partition %s (owned by %s) stayed unread for %s, want at most 2 × ownership_expiration = %s",
					watch.longestP, watch.longestWho, watch.longest.Round(100*time.Millisecond), bound)
			}
			moved := false
			for p, who := range ownedByA {
				if who == "A" && after[p] > before[p] {
					moved = true
				}
			}
			if !moved {
				t.Errorf("A committed nothing over the slow path: before %v, after %v", before, after)
			}

			// Every event is committed while the path is still slow; the
			// heal only shortens the final drain.
			feed.close()
			total := feed.total()
			waitForRows(t, ctx, runs["A"], dsn, total)
			proxy.Heal()
			stopRuns(t, runs, stopA, stopB)
			wantEveryEventOnce(t, ctx, dsn, total)
			var errs []string
			for line := range strings.Lines(logs.String()) {
				if strings.Contains(line, "level=ERROR") {
					errs = append(errs, line)
				}
			}
			if len(errs) > 0 {
				t.Errorf("%d ERROR lines over a slow path, want none; the first: %s", len(errs), errs[0])
			}
		})
	}
}
