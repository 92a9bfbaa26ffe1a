package deploytest

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// monitoredMetrics are the metric names the rendered PrometheusRule's expressions and the
// rendered dashboard's JSON name, each with the places that name it.
func monitoredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	rule := renderedKind(t, monitoringValues, "PrometheusRule")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rs {
			r := r.(map[string]any)
			expr, _ := r["expr"].(string)
			for _, m := range metricRef.FindAllString(expr, -1) {
				out[m] = append(out[m], "alert "+r["alert"].(string))
			}
		}
	}
	cm := renderedKind(t, monitoringValues, "ConfigMap")
	dash, _, _ := unstructured.NestedString(cm.Object, "data", "configmap-attacher.json")
	for _, m := range metricRef.FindAllString(dash, -1) {
		out[m] = append(out[m], "the dashboard")
	}
	return out
}

// servedRegistry builds the service as `serve --fleet --watch --gc-interval
// --eventbus-url` builds it (nothing is run, nothing is dialled) and returns the registry
// its /metrics serves.
func servedRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	srv, err := server.New(controlplane.Require(t, cp).RESTConfig(), server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Logger: testfix.Quiet(), ShutdownTimeout: time.Second,
		Fleet: &server.FleetOptions{Namespace: "default", Addr: "127.0.0.1:0"},
		Ingress: server.Ingress{Watch: true, GC: &server.GCOptions{Interval: time.Hour, Options: gc.Options{MinAge: time.Hour}},
			EventBus: &eventbus.SubscriberOptions{URL: "nats://127.0.0.1:1", Stream: "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Running it with an ended context closes the listeners New bound.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = srv.Run(ctx)
	return srv.Dispatcher().Metrics().Registry
}

// registered reports whether reg holds a metric named name: registering a collector
// describing that name alone fails exactly when one is (same name: a duplicate, or a help
// string or labels that differ).
func registered(t *testing.T, reg *prometheus.Registry, name string) bool {
	t.Helper()
	probe := probeCollector{prometheus.NewDesc(name, "probe", nil, nil)}
	err := reg.Register(probe)
	if err == nil {
		reg.Unregister(probe)
		return false
	}
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) && !strings.Contains(err.Error(), "same fully-qualified name") {
		t.Fatalf("probing %s: %v", name, err)
	}
	return true
}

type probeCollector struct{ d *prometheus.Desc }

func (p probeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- p.d }
func (p probeCollector) Collect(chan<- prometheus.Metric)    {}

// TestAlertsAndDashboardReadOnlyRegisteredMetrics: every metric the chart's alerts and
// dashboard name is registered by the service itself (its own /metrics registry, built
// with the fleet, the watchers, the sweeps and the EventBus on), a histogram's series by
// their base name; a name the service does not register is caught.
func TestAlertsAndDashboardReadOnlyRegisteredMetrics(t *testing.T) {
	reg := servedRegistry(t)
	used := monitoredMetrics(t)
	names := make([]string, 0, len(used))
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		base := n
		for _, suffix := range []string{"_bucket", "_count", "_sum"} {
			if b, ok := strings.CutSuffix(n, suffix); ok && registered(t, reg, b) {
				base = b
			}
		}
		if !registered(t, reg, base) {
			t.Errorf("%s, read by %s, is not registered by the service", n, strings.Join(used[n], ", "))
		}
	}
	for _, want := range []string{"configmap_attacher_cluster_owned", "configmap_attacher_fleet_clusters", "configmap_attacher_events_total"} {
		if _, ok := used[want]; !ok {
			t.Errorf("the alerts and dashboard no longer read %s: the list this test checks is not what it was", want)
		}
	}
	if registered(t, reg, "configmap_attacher_fleet_clusters_unowned") {
		t.Error("a name the service never registered probes as registered: the check proves nothing")
	}
}
