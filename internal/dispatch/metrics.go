package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's Prometheus metrics, in their own registry (so that several
// services can live in one process, e.g. in tests). Every way in counts through the
// dispatcher, so every series has the same labels on every path.
type Metrics struct {
	// Registry holds every metric below plus the Go and process collectors; the other
	// parts of the service (cluster registry, sweeper, EventBus) register theirs here.
	Registry *prometheus.Registry

	events      *prometheus.CounterVec
	objects     *prometheus.CounterVec
	givenUp     *prometheus.CounterVec
	unprotected *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	inFlight    prometheus.Gauge
}

// NewMetrics returns a fresh set of metrics:
//
//	configmap_attacher_events_total{cluster,path,result}    events handled, by Class; cluster is the
//	                                                         registered cluster the event went to, ""
//	                                                         when it reached none (bad input, unknown
//	                                                         or unavailable cluster, busy), so that
//	                                                         hostile names never become label values
//	configmap_attacher_objects_total{cluster,outcome}       ConfigMaps/Secrets considered, by outcome
//	configmap_attacher_events_given_up_total{cluster,path,reason}
//	                                                         events no way in will retry: permanent
//	                                                         (answered so), max-deliver (EventBus),
//	                                                         max-retries (watcher)
//	configmap_attacher_unprotected_revisions_total{cluster,reason}
//	                                                         revisions attached that a neighbour would
//	                                                         still delete (core.Unprotected: reason
//	                                                         ExternalSecretTargetRename or
//	                                                         NotProtectedFromPruning)
//	configmap_attacher_event_duration_seconds{path}          time to handle one event
//	configmap_attacher_events_in_flight                      events being handled
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_events_total",
			Help: "Events handled, by ingress path and result (ok, ignored, invalid, refused, permanent, unavailable, deadline, busy, ...)."},
			[]string{"cluster", "path", "result"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_objects_total",
			Help: "ConfigMaps and Secrets considered, by cluster and outcome (attached, already-attached, skipped, ...)."},
			[]string{"cluster", "outcome"}),
		givenUp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_events_given_up_total",
			Help: "Events that will not be retried by their way in, by reason (permanent, max-deliver, max-retries)."},
			[]string{"cluster", "path", "reason"}),
		unprotected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_unprotected_revisions_total",
			Help: "Revisions attached that a neighbour still deletes whatever their owners (External Secrets renaming the target, Argo CD's controller-only owner references), by reason."},
			[]string{"cluster", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "configmap_attacher_event_duration_seconds",
			Help: "Time to handle one event.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}, []string{"path"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "configmap_attacher_events_in_flight",
			Help: "Events being handled now."}),
	}
	m.Registry.MustRegister(m.events, m.objects, m.givenUp, m.unprotected, m.duration, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts one answered event.
func (m *Metrics) observe(path Path, start time.Time, a *Answer) {
	cluster := a.Response.Cluster
	m.duration.WithLabelValues(string(path)).Observe(time.Since(start).Seconds())
	m.events.WithLabelValues(cluster, string(path), string(a.Class)).Inc()
	for _, o := range a.Response.Objects {
		m.objects.WithLabelValues(cluster, string(o.Outcome)).Inc()
		for _, w := range o.Warnings {
			m.unprotected.WithLabelValues(cluster, w.Reason).Inc()
		}
	}
	if a.Class == ClassPermanent {
		m.givenUp.WithLabelValues(cluster, string(path), "permanent").Inc()
	}
}
