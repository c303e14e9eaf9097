package ops

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ehsink/ehsink/internal/connector"
)

// Collector exports the lag of the partitions a Control sees and the
// connectors' dead-letter counts, from a status snapshot at each scrape
// (the connectors' state is connector.Metrics' ehsink_connector_state).
// Register it with the registry that /metrics serves.
type Collector struct {
	control *connector.Control
	now     func() time.Time
}

// NewCollector returns a collector over control.
func NewCollector(control *connector.Control) *Collector {
	return &Collector{control: control, now: time.Now}
}

var (
	partitionLabels = []string{"connector", "partition"}
	descLag         = prometheus.NewDesc("ehsink_partition_lag_events",
		"Events in the partition after the sink's watermark: last enqueued sequence number minus the watermark.", partitionLabels, nil)
	descLagSeconds = prometheus.NewDesc("ehsink_partition_lag_seconds",
		"Age of the partition's backlog: now minus the enqueued time of the last committed event while the lag is above 0, else 0.", partitionLabels, nil)
	descLastEnqueued = prometheus.NewDesc("ehsink_partition_last_enqueued_sequence_number",
		"Last enqueued sequence number of the partition, from its properties (refreshed on an interval) and the batches received.", partitionLabels, nil)
	descSinceCommit = prometheus.NewDesc("ehsink_partition_seconds_since_last_commit",
		"Seconds since the sink last committed events of the partition in this process.", partitionLabels, nil)
	// Reasons are free text (values, schema ids): as labels they would make
	// a series per refused value, so the gauge has the state only and the
	// status API has the reasons.
	descLetters = prometheus.NewDesc("ehsink_dead_letters_stored",
		"Dead letters in the connector's store as last counted, by state: pending (not replayed) or replayed.", []string{"connector", "state"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descLagSeconds, descLastEnqueued, descSinceCommit, descLetters} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	now := c.now()
	for _, st := range c.control.Statuses() {
		if dl := st.DeadLetters; dl != nil {
			ch <- prometheus.MustNewConstMetric(descLetters, prometheus.GaugeValue, float64(dl.Pending), st.Name, "pending")
			ch <- prometheus.MustNewConstMetric(descLetters, prometheus.GaugeValue, float64(dl.Replayed), st.Name, "replayed")
		}
		for _, p := range st.Partitions {
			if p.Lag != nil {
				ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(*p.Lag), st.Name, p.ID)
				ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, p.LagSeconds, st.Name, p.ID)
			}
			if p.LastEnqueued != nil {
				ch <- prometheus.MustNewConstMetric(descLastEnqueued, prometheus.GaugeValue, float64(*p.LastEnqueued), st.Name, p.ID)
			}
			if p.LastCommit != nil {
				ch <- prometheus.MustNewConstMetric(descSinceCommit, prometheus.GaugeValue, now.Sub(*p.LastCommit).Seconds(), st.Name, p.ID)
			}
		}
	}
}
