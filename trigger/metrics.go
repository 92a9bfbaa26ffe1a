package trigger

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Metrics are the service's Prometheus metrics, in their own registry (so that several
// services can live in one process, e.g. in tests).
type Metrics struct {
	// Registry holds every metric below plus the Go and process collectors.
	Registry *prometheus.Registry

	events   *prometheus.CounterVec
	objects  *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
}

// NewMetrics returns a fresh set of metrics:
//
//	configmap_attacher_events_total{cluster,path,result}    events handled (path grpc, http, and with
//	                                                         ObserveResult eventbus, watcher), by error class; cluster is
//	                                                         the registered cluster the event went to,
//	                                                         "" when it reached none (bad input, unknown
//	                                                         or unavailable cluster, busy), so that
//	                                                         hostile names never become label values
//	configmap_attacher_objects_total{cluster,outcome}       ConfigMaps/Secrets considered, by outcome
//	configmap_attacher_event_duration_seconds{path}          time to handle one event
//	configmap_attacher_events_in_flight                      events being handled
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_events_total",
			Help: "Events handled, by ingress path and result (ok, ignored, invalid, refused, unavailable, deadline, busy, ...)."},
			[]string{"cluster", "path", "result"}),
		objects: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "configmap_attacher_objects_total",
			Help: "ConfigMaps and Secrets considered, by cluster and outcome (attached, already-attached, skipped, ...)."},
			[]string{"cluster", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "configmap_attacher_event_duration_seconds",
			Help: "Time to handle one event.", Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12)}, []string{"path"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "configmap_attacher_events_in_flight",
			Help: "Events being handled now."}),
	}
	m.Registry.MustRegister(m.events, m.objects, m.duration, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Reject counts an event refused before reaching the service (bad payload, body too
// large, wrong content type).
func (m *Metrics) Reject(path string, err error) {
	m.events.WithLabelValues("", path, string(Classify(err))).Inc()
}

func (m *Metrics) observe(path string, start time.Time, r *Response, err error) {
	m.duration.WithLabelValues(path).Observe(time.Since(start).Seconds())
	m.ObserveResult(path, &r.Result, err)
}

// ObserveResult counts one event handled outside the trigger service (path "watcher",
// "eventbus"): events_total{cluster,path,result} and objects_total{cluster,outcome}, so
// that every ingress path shows in the same series. r may be nil (nothing resolved).
func (m *Metrics) ObserveResult(path string, r *core.Result, err error) {
	cluster := ""
	if r != nil {
		cluster = r.Cluster
	}
	m.events.WithLabelValues(cluster, path, string(Classify(err))).Inc()
	if r == nil {
		return
	}
	for _, o := range r.Objects {
		m.objects.WithLabelValues(cluster, string(o.Outcome)).Inc()
	}
}
