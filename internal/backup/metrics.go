package backup

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The metrics of backups, served with the controller's other metrics.
// Durations are one histogram for all control planes (per-cluster buckets
// would multiply series); sizes, ages and failures are per cluster.
var (
	snapshotDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hostedcp_etcd_backup_duration_seconds",
		Help:    "Time to take, upload and verify one etcd snapshot that was stored.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 14),
	})
	snapshotSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostedcp_etcd_backup_size_bytes",
		Help: "Size of the newest etcd snapshot stored, by control plane.",
	}, []string{"namespace", "name"})
	snapshotFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hostedcp_etcd_backup_failures_total",
		Help: "etcd snapshots that were not stored, by control plane and BackupReady reason.",
	}, []string{"namespace", "name", "reason"})
	interval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hostedcp_etcd_backup_interval_seconds",
		Help: "Seconds between the next scheduled etcd snapshot and the one after it, by control plane: what a snapshot's age is measured against.",
	}, []string{"namespace", "name"})
	newest = &ageCollector{desc: prometheus.NewDesc("hostedcp_etcd_backup_newest_age_seconds",
		"Seconds since the newest etcd snapshot that was stored and verified, by control plane.",
		[]string{"namespace", "name"}, nil), last: map[types.NamespacedName]time.Time{}}
)

func init() {
	metrics.Registry.MustRegister(snapshotDuration, snapshotSize, snapshotFailures, interval, newest)
}

// ageCollector reports the age of each control plane's newest snapshot at
// the time of the scrape.
type ageCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	last map[types.NamespacedName]time.Time
}

func (c *ageCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *ageCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for cp, at := range c.last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, time.Since(at).Seconds(), cp.Namespace, cp.Name)
	}
}

func (c *ageCollector) set(cp types.NamespacedName, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[cp] = at
}

// forget drops every series of a control plane that no longer takes backups.
func forget(cp types.NamespacedName) {
	newest.mu.Lock()
	delete(newest.last, cp)
	newest.mu.Unlock()
	snapshotSize.DeleteLabelValues(cp.Namespace, cp.Name)
	interval.DeleteLabelValues(cp.Namespace, cp.Name)
	snapshotFailures.DeletePartialMatch(prometheus.Labels{"namespace": cp.Namespace, "name": cp.Name})
}
