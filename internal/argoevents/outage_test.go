package argoevents_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"github.com/nats-io/nats.go/jetstream"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configmap-attacher/configmap-attacher/internal/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testfix"
)

// exhaustedLog is what sensor-service v1.9.11 logs when a trigger's retries are used up
// (pkg/sensors/listener.go); it then acknowledges the EventBus message all the same.
const exhaustedLog = "failed to trigger actions"

// TestSensorExhaustedDuringOutageIsRepaired: the real sensor-service runs the shipped gRPC
// Sensor (at-least-once, its retry strategy shortened so that the test's outage outlasts
// it) against the service, whose connection to kube-apiserver is cut (a partition: the
// EventSource and the test still reach the apiserver). 20 ReplicaSets appear during the
// outage; the Sensor's retries end, it logs the failure and acknowledges every event
// (nothing left pending on its consumer), and nothing is written. Once the connection is
// back, the service repairs it by itself: the revision side's resync attaches every
// revision to its ReplicaSet, with no event from the Sensor. Counted: every ReplicaSet
// attached, each ConfigMap's owners changed exactly once, PATCHes = 20.
func TestSensorExhaustedDuringOutageIsRepaired(t *testing.T) {
	const n = 20
	e := newEnv(t)
	proxy := testfix.NewCutProxy(t, apiserverHostPort(t, e.cp.RESTConfig().Host))
	counter := &kube.RequestCounter{}
	srv := startOutageServer(t, e, proxy, counter)
	e.grpcAddr = srv.GRPCAddr()
	s := shortenRetries(t, e.sensor(argoevents.GRPCSensorFile))
	e.start(argoevents.Config{EventSource: e.eventSource()}, eventSourceReady)
	sensor := e.start(argoevents.Config{Sensor: e.aim(s)}, sensorReady)

	cms := make([]string, n)
	for i := range cms {
		cms[i] = e.createRevision(fmt.Sprintf("app-%02d-config", i)).Name
	}
	controlplane.Eventually(t, 30*time.Second, "the revisions seen by the revision side", func() error {
		if got := eventsCount(t, srv, "revision", ""); got < n {
			return fmt.Errorf("%d of %d revision events", got, n)
		}
		return nil
	})
	changes := countOwnerChanges(t, e)
	patches := counter.Count("PATCH")

	proxy.Cut()
	cut := time.Now()
	rss := make(map[string]types.UID, n) // ConfigMap -> ReplicaSet UID
	names := make(map[string]string, n)
	for i, cm := range cms {
		rs := e.createRolloutReplicaSet(fmt.Sprintf("app-%02d", i), cm)
		rss[cm], names[cm] = rs.UID, rs.Name
	}
	controlplane.Eventually(t, 3*time.Minute, "the Sensor giving up every event", func() error {
		if got := strings.Count(sensor.Logs(), exhaustedLog); got < n {
			return fmt.Errorf("%d of %d events exhausted", got, n)
		}
		return nil
	})
	pending := sensorPending(t, e)
	t.Logf("outage: the Sensor gave up %d events after %s; %d gRPC answers unavailable; left on its consumer: %d",
		n, time.Since(cut).Round(time.Millisecond), eventsCount(t, srv, "grpc", "unavailable"), pending)
	if pending != 0 {
		t.Errorf("the Sensor left %d messages unacknowledged; want 0 (it acknowledges exhausted events)", pending)
	}
	if got := counter.Count("PATCH") - patches; got != 0 {
		t.Errorf("%d PATCHes during the outage; want 0", got)
	}
	grpcBefore := eventsCount(t, srv, "grpc", "")

	proxy.Heal()
	healed := time.Now()
	for cm, uid := range rss {
		e.waitOwned(cm, names[cm], uid)
	}
	t.Logf("repaired: %d/%d attached %s after the connection came back (resync 2 s)", n, n, time.Since(healed).Round(time.Millisecond))
	checkWrittenOnce(t, changes, cms)
	if got := counter.Count("PATCH") - patches; got != n {
		t.Errorf("%d PATCHes; want %d (one per revision)", got, n)
	}
	if got := eventsCount(t, srv, "grpc", "") - grpcBefore; got != 0 {
		t.Errorf("%d gRPC events after the outage; want 0 (the Sensor acknowledged them; the repair is the service's)", got)
	}
}

// apiserverHostPort returns host:port of a REST config's Host URL.
func apiserverHostPort(t *testing.T, host string) string {
	t.Helper()
	u, err := url.Parse(host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// startOutageServer runs the service (gRPC, no --watch) with its apiserver connection
// through proxy and its requests counted; the revision side resyncs every 2 s.
func startOutageServer(t *testing.T, e *env, proxy *testfix.CutProxy, counter *kube.RequestCounter) *server.Server {
	t.Helper()
	cfg := counter.Wrap(e.cp.RESTConfig())
	cfg.Host = "https://" + proxy.Addr()
	srv, err := server.New(cfg, server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		ProbeInterval: 200 * time.Millisecond, Ingress: server.Ingress{WatchResync: 2 * time.Second}})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	if err := srv.Cache().WaitForSync(e.ctx); err != nil {
		t.Fatalf("server caches: %v", err)
	}
	return srv
}

// shortenRetries checks that every trigger of the shipped Sensor is at-least-once with a
// retry strategy, then shortens it to 3 tries over about 0.6 s so that a test's outage
// outlasts it (the shipped one spans about 2 minutes).
func shortenRetries(t *testing.T, s *v1alpha1.Sensor) *v1alpha1.Sensor {
	t.Helper()
	d, f := v1alpha1.FromString("200ms"), v1alpha1.NewAmount("2")
	for i := range s.Spec.Triggers {
		tr := &s.Spec.Triggers[i]
		if !tr.AtLeastOnce || tr.RetryStrategy == nil || tr.RetryStrategy.Steps < 2 {
			t.Fatalf("shipped trigger %s: atLeastOnce %v, retryStrategy %+v; want at-least-once with retries", tr.Template.Name, tr.AtLeastOnce, tr.RetryStrategy)
		}
		tr.RetryStrategy = &v1alpha1.Backoff{Steps: 3, Duration: &d, Factor: &f}
	}
	return s
}

// eventsCount sums configmap_attacher_events_total of path (and result, when set).
func eventsCount(t *testing.T, srv *server.Server, path, result string) int {
	t.Helper()
	mfs, err := srv.Dispatcher().Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != "configmap_attacher_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["path"] == path && (result == "" || labels["result"] == result) {
				n += int(m.GetCounter().GetValue())
			}
		}
	}
	return n
}

// sensorPending returns the messages of the test's EventBus stream that the Sensors'
// durable consumers have not acknowledged (pending or delivered and unacknowledged).
func sensorPending(t *testing.T, e *env) int {
	t.Helper()
	nc, err := e.nats.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ci := range st.ListConsumers(e.ctx).Info() {
		n += int(ci.NumPending) + ci.NumAckPending
	}
	return n
}

// ownerChanges counts, per ConfigMap of the test namespace, the updates that changed its
// ownerReferences (the watch sees every state).
type ownerChanges struct {
	mu sync.Mutex
	by map[string]int
}

func countOwnerChanges(t *testing.T, e *env) *ownerChanges {
	t.Helper()
	w, err := e.kube.CoreV1().ConfigMaps(e.ns).Watch(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	oc := &ownerChanges{by: map[string]int{}}
	last := map[string][]metav1.OwnerReference{}
	go func() {
		for ev := range w.ResultChan() {
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok || ev.Type == watch.Bookmark {
				continue
			}
			if prev, seen := last[cm.Name]; seen && !equality.Semantic.DeepEqual(prev, cm.OwnerReferences) {
				oc.mu.Lock()
				oc.by[cm.Name]++
				oc.mu.Unlock()
			}
			last[cm.Name] = cm.OwnerReferences
		}
	}()
	return oc
}

// checkWrittenOnce requires every ConfigMap's owners to have changed exactly once.
func checkWrittenOnce(t *testing.T, oc *ownerChanges, cms []string) {
	t.Helper()
	controlplane.Eventually(t, 10*time.Second, "the watch seeing every attach", func() error {
		oc.mu.Lock()
		defer oc.mu.Unlock()
		for _, cm := range cms {
			if oc.by[cm] == 0 {
				return fmt.Errorf("%s: no owner change seen yet", cm)
			}
		}
		return nil
	})
	oc.mu.Lock()
	defer oc.mu.Unlock()
	twice := 0
	for _, cm := range cms {
		if oc.by[cm] > 1 {
			twice++
		}
	}
	t.Logf("written once: %d, twice or more: %d", len(cms)-twice, twice)
	if twice != 0 {
		t.Errorf("%d ConfigMaps had their owners changed more than once; want 0", twice)
	}
}

// durablePending returns the messages the durable consumer name has not acknowledged.
func durablePending(t *testing.T, e *env, name string) int {
	t.Helper()
	nc, err := e.nats.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.Consumer(e.ctx, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	ci, err := c.Info(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return int(ci.NumPending) + ci.NumAckPending
}
