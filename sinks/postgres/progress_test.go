package postgres

import (
	"sync/atomic"
	"testing"

	"github.com/ehsink/ehsink/sinks"
	"github.com/ehsink/ehsink/sinks/sinktest"
)

// TestSessionsReportProgress: the sink's sessions report their traffic
// (sinks.Progress) to the call that uses them: the connections New dials,
// the pooled session Open reads the watermark on, and the one a Flush
// commits on; a session released by one call reports nothing more to it.
// Without the reports the runner's sink_timeout takes a slow server's
// flush for a dead one.
func TestSessionsReportProgress(t *testing.T) {
	ctx := testCtx(t)
	cfg := appendConfig(t, newDB(t))
	cfg.CreateTable = true
	var newCalls, open, flush1, flush2 atomic.Int32
	counting := func(n *atomic.Int32) func() { return func() { n.Add(1) } }

	s, err := newPostgresSink(sinks.WithProgress(ctx, counting(&newCalls)), cfg, testInfo)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	w, _, err := s.Open(sinks.WithProgress(ctx, counting(&open)), "0")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	events := sinktest.Events("0", 0, 19)
	var after int32
	for i, n := range []*atomic.Int32{&flush1, &flush2} {
		if err := w.Write(ctx, events[i*10:i*10+10]); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(sinks.WithProgress(ctx, counting(n))); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			after = flush1.Load()
		}
	}
	for name, n := range map[string]*atomic.Int32{"New": &newCalls, "Open": &open, "the first Flush": &flush1, "the second Flush": &flush2} {
		if n.Load() == 0 {
			t.Errorf("%s heard of no traffic on its sessions", name)
		}
	}
	if got := flush1.Load(); got != after {
		t.Errorf("the first Flush heard of %d reports of the second one's session", got-after)
	}
}
