package connector

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of the runners. Make them once per
// process with NewMetrics and pass them in RunOptions; a nil *Metrics
// records nothing.
type Metrics struct {
	written      *prometheus.CounterVec
	skipped      *prometheus.CounterVec
	filtered     *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	retries      *prometheus.CounterVec
	flushSeconds *prometheus.HistogramVec
	watermark    *prometheus.GaugeVec
	checkpoint   *prometheus.GaugeVec
	owned        *prometheus.GaugeVec
	heals        *prometheus.CounterVec
	breaker      *prometheus.GaugeVec
	state        *prometheus.GaugeVec
	blobReqs     *prometheus.CounterVec

	mu     sync.Mutex      // guards failed
	failed map[string]bool // connectors whose last state is failed
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	partition := []string{"connector", "partition"}
	m := &Metrics{
		written: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_events_committed_total", Help: "Events the sink committed.",
		}, partition),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_events_skipped_total", Help: "Replayed events dropped because the sink's watermark already covered them, or another writer committed them first.",
		}, partition),
		filtered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_events_filtered_total", Help: "Events the connector's filter dropped before the sink (not dead letters).",
		}, partition),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_events_dead_lettered_total", Help: "Events the sink rejected and the dead-letter path stored.",
		}, partition),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_retries_total", Help: "Retries of transient sink failures, by operation.",
		}, []string{"connector", "op"}),
		flushSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "ehsink_flush_duration_seconds", Help: "Time of successful sink flushes (durable commits).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"connector"}),
		watermark: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ehsink_sink_watermark_sequence_number", Help: "Sequence number of the last event the sink committed.",
		}, partition),
		checkpoint: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ehsink_checkpoint_sequence_number", Help: "Sequence number of the last checkpoint written.",
		}, partition),
		owned: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ehsink_partitions_owned", Help: "Partitions this process currently owns.",
		}, []string{"connector"}),
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_partition_heals_total",
			Help: "Stalls the source's watchdog healed, by reason: unread (owned with no reader; processor restarted), silent (a reader that stopped; reopened), processor_failed (restarted after a backoff).",
		}, []string{"connector", "reason"}),
		breaker: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ehsink_circuit_breaker_state",
			Help: "The connector's circuit breaker on its sink: 0 closed, 1 open (not receiving), 2 half-open (probing).",
		}, []string{"connector"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "ehsink_connector_state",
			Help: "1 for the connector's current state (starting, sink_unavailable, running, paused, failed, stopped), 0 for the others.",
		}, []string{"connector", "state"}),
		blobReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ehsink_blob_requests_total",
			Help: "Requests the connector's Blob checkpoint store sent (leases, checkpoints, lists), retries included, by operation: what Blob Storage bills.",
		}, []string{"connector", "op"}),
	}
	for _, c := range []prometheus.Collector{m.written, m.skipped, m.filtered, m.deadLettered, m.retries, m.flushSeconds, m.watermark, m.checkpoint, m.owned, m.heals, m.breaker, m.state, m.blobReqs} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// blobRequests returns the counter of a connector's Blob store requests,
// by operation (nil: none kept).
func (m *Metrics) blobRequests(connector string) func(op string) {
	if m == nil {
		return nil
	}
	return func(op string) { m.blobReqs.WithLabelValues(connector, op).Inc() }
}

// partitionMetrics are the metrics of one partition run, bound to its labels.
type partitionMetrics struct {
	m                      *Metrics
	connector              string
	written, skipped, dead prometheus.Counter
	dropped                prometheus.Counter
	watermark, checkpoint  prometheus.Gauge
}

func (m *Metrics) forPartition(connector, partition string) *partitionMetrics {
	if m == nil {
		return nil
	}
	l := prometheus.Labels{"connector": connector, "partition": partition}
	m.owned.WithLabelValues(connector).Inc()
	return &partitionMetrics{
		m: m, connector: connector,
		written: m.written.With(l), skipped: m.skipped.With(l), dead: m.deadLettered.With(l), dropped: m.filtered.With(l),
		watermark: m.watermark.With(l), checkpoint: m.checkpoint.With(l),
	}
}

func (p *partitionMetrics) release() {
	if p != nil {
		p.m.owned.WithLabelValues(p.connector).Dec()
	}
}

func (p *partitionMetrics) skippedEvents(n int) {
	if p != nil && n > 0 {
		p.skipped.Add(float64(n))
	}
}

func (p *partitionMetrics) filtered(n int) {
	if p != nil && n > 0 {
		p.dropped.Add(float64(n))
	}
}

func (p *partitionMetrics) deadLettered(n int) {
	if p != nil {
		p.dead.Add(float64(n))
	}
}

func (p *partitionMetrics) flushed(events int, seq *int64, took time.Duration) {
	if p == nil {
		return
	}
	p.written.Add(float64(events))
	p.m.flushSeconds.WithLabelValues(p.connector).Observe(took.Seconds())
	if seq != nil {
		p.watermark.Set(float64(*seq))
	}
}

func (p *partitionMetrics) checkpointed(seq int64) {
	if p != nil {
		p.checkpoint.Set(float64(seq))
	}
}

func (m *Metrics) retried(connector, op string) {
	if m != nil {
		m.retries.WithLabelValues(connector, op).Inc()
	}
}

func (m *Metrics) healed(connector, reason string) {
	if m != nil {
		m.heals.WithLabelValues(connector, reason).Inc()
	}
}

func (m *Metrics) breakerState(connector string, state int) {
	if m != nil {
		m.breaker.WithLabelValues(connector).Set(float64(state))
	}
}

// Connector states of ehsink_connector_state.
const (
	stateStarting        = "starting"
	stateSinkUnavailable = "sink_unavailable"
	stateRunning         = "running"
	stateFailed          = "failed"
	stateStopped         = "stopped"
	statePaused          = "paused"
)

func (m *Metrics) connectorState(connector, state string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.failed == nil {
		m.failed = map[string]bool{}
	}
	if state == stateFailed {
		m.failed[connector] = true
	} else {
		delete(m.failed, connector)
	}
	m.mu.Unlock()
	for _, s := range [...]string{stateStarting, stateSinkUnavailable, stateRunning, statePaused, stateFailed, stateStopped} {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(connector, s).Set(v)
	}
}

// Failed returns the connectors that failed (and stopped) in this process,
// sorted, for a health check. Safe for concurrent use; nil on a nil
// *Metrics.
func (m *Metrics) Failed() []string {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.failed))
}
