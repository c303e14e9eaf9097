package connector

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// trimSink's writers report, after every flush, that another writer had
// committed two of its events first.
type trimSink struct{ sinks.Sink }

func (s trimSink) Open(ctx context.Context, partition string) (sinks.Writer, *sinks.Position, error) {
	w, wm, err := s.Sink.Open(ctx, partition)
	return trimWriter{w}, wm, err
}

type trimWriter struct{ sinks.Writer }

func (trimWriter) Trimmed() int { return 2 }

// TestTrimmedEventsAreNotCountedCommitted: what a Trimmer dropped because
// another replica committed it first counts as skipped, so the replicas'
// ehsink_events_committed_total add up to what the destination holds
// (the network tests stop once they do).
func TestTrimmedEventsAreNotCountedCommitted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	met, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store := &memCheckpoints{pos: map[string]sinks.Position{}}
	p := newMemPartition("0", 100, store, rand.New(rand.NewPCG(3, 4)), cancel)
	r, _ := NewRunner(RunnerOptions{Connector: "c", Sink: trimSink{sinktest.NewMemory()}, Metrics: met})
	if err := r.RunPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	committed := testutil.ToFloat64(met.written.WithLabelValues("c", "0"))
	skipped := testutil.ToFloat64(met.skipped.WithLabelValues("c", "0"))
	if committed+skipped != 100 || skipped == 0 {
		t.Fatalf("committed %v + skipped %v, want 100, the trimmed (two per flush, at most the flush's events) skipped", committed, skipped)
	}
}
