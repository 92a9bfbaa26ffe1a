package gc

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the sweep's Prometheus metrics. All are counters or histograms labelled
// by cluster; the zero value (nil *Metrics) records nothing.
type Metrics struct {
	// Deleted counts revisions deleted, by cluster and kind
	// (configmap_attacher_gc_deleted_total).
	Deleted *prometheus.CounterVec
	// Skipped counts planned deletions not done, by cluster and reason: "changed"
	// (precondition failed), "gone" (already deleted), "error"
	// (configmap_attacher_gc_delete_skipped_total).
	Skipped *prometheus.CounterVec
	// Repaired counts revisions attached by a sweep, by cluster
	// (configmap_attacher_gc_repaired_total).
	Repaired *prometheus.CounterVec
	// Sweeps counts namespace sweeps, by cluster and result ok|error
	// (configmap_attacher_gc_sweeps_total).
	Sweeps *prometheus.CounterVec
	// Duration observes the seconds a namespace sweep took, by cluster
	// (configmap_attacher_gc_sweep_duration_seconds).
	Duration *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them with reg (nil: not registered).
// Registering twice with one registry returns the registry's AlreadyRegisteredError.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Deleted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_gc_deleted_total",
			Help: "Config revisions deleted by the orphan sweep."}, []string{"cluster", "kind"}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_gc_delete_skipped_total",
			Help: "Planned deletions not done: changed meanwhile, already gone, or error."}, []string{"cluster", "reason"}),
		Repaired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_gc_repaired_total",
			Help: "Referenced but unattached revisions attached by the sweep."}, []string{"cluster"}),
		Sweeps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_gc_sweeps_total",
			Help: "Namespace sweeps, by result."}, []string{"cluster", "result"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "configmap_attacher_gc_sweep_duration_seconds",
			Help: "Duration of one namespace sweep in seconds.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{"cluster"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Deleted, m.Skipped, m.Repaired, m.Sweeps, m.Duration} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
