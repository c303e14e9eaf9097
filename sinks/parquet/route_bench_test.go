package parquet

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRoutedWrite writes 100,000 order events through a sink without
// routes and through one with two routes (paid orders to one path, the
// others to a path per status: four values, so five files per commit), in
// the same loop, and reports both throughputs and their ratio
// (routed/single).
func BenchmarkRoutedWrite(b *testing.B) {
	const n = 100_000
	events := benchEvents(n)
	routes := func(c *sinkConfig) {
		c.Routes = []routeConfig{
			{Name: "paid", When: `$.status == 'paid'`, Path: "paid/{partition}-{first_seq:020}-{last_seq:020}.parquet", Columns: c.Columns},
			{Path: "status={$.status}/{partition}-{first_seq:020}-{last_seq:020}.parquet", Columns: c.Columns},
		}
		c.Columns = nil
	}
	var single, routed time.Duration
	for b.Loop() {
		dir := b.TempDir()
		start := time.Now()
		runSinkWith(b, filepath.Join(dir, "single"), events, nil)
		single += time.Since(start)
		start = time.Now()
		runSinkWith(b, filepath.Join(dir, "routed"), events, routes)
		routed += time.Since(start)
	}
	singleRate := float64(n*b.N) / single.Seconds()
	routedRate := float64(n*b.N) / routed.Seconds()
	b.ReportMetric(singleRate, "single_events/s")
	b.ReportMetric(routedRate, "routed_events/s")
	b.ReportMetric(routedRate/singleRate, "ratio")
}
