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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// exhaustedLog is what sensor-service v1.9.11 logs when a trigger's retries are used up
// (pkg/sensors/listener.go); it then acknowledges the EventBus message all the same.
const exhaustedLog = "failed to trigger actions"

// TestSensorExhaustedDuringOutageIsRepaired: the real sensor-service runs the shipped gRPC
// Sensor (at-least-once, its retry strategy shortened so that the test's outage outlasts
// it) against the service, during an outage of each kind: the service's connection to
// kube-apiserver cut (a partition: the EventSource and the test still reach the
// apiserver), or the service itself down. ReplicaSets appear during the outage; the
// Sensor's retries end, it logs the failure and acknowledges every event (nothing left
// pending on its consumer), and nothing is written. Once the outage ends the service
// repairs it by itself (the revision side's resync, or its initial list on a restart),
// with no event from the Sensor. Counted: every ReplicaSet attached, each ConfigMap's
// owners changed exactly once, one PATCH per ReplicaSet.
func TestSensorExhaustedDuringOutageIsRepaired(t *testing.T) {
	outages := []struct {
		name string
		// n ReplicaSets appear during the outage. With the service down, each try of
		// sensor-service first waits about 6 s for a connection and the events are
		// handled one after another (about 20 s each here): 3 keep the test short.
		n          int
		begin, end func(t *testing.T, r *outageRig)
	}{
		{"kube-apiserver unreachable from the service", 20,
			func(_ *testing.T, r *outageRig) { r.proxy.Cut() }, func(_ *testing.T, r *outageRig) { r.proxy.Heal() }},
		{"the service down", 3,
			func(_ *testing.T, r *outageRig) { r.stop() }, func(t *testing.T, r *outageRig) { r.start(t) }},
	}
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			n := o.n
			r := newOutageRig(t)
			sensor := r.e.start(argoevents.Config{Sensor: r.e.aim(shortenRetries(t, r.e.sensor(argoevents.GRPCSensorFile)))}, sensorReady)
			cms := make([]string, n)
			for i := range cms {
				cms[i] = r.e.createRevision(fmt.Sprintf("app-%02d-config", i)).Name
			}
			controlplane.Eventually(t, 30*time.Second, "the revisions seen by the revision side", func() error {
				if got := eventsCount(t, r.srv, "revision", ""); got < n {
					return fmt.Errorf("%d of %d revision events", got, n)
				}
				return nil
			})
			changes := countOwnerChanges(t, r.e)
			patches := r.counter.Count("PATCH")

			o.begin(t, r)
			began := time.Now()
			rss := make(map[string]*appsv1.ReplicaSet, n) // by ConfigMap
			for i, cm := range cms {
				rss[cm] = r.e.createRolloutReplicaSet(fmt.Sprintf("app-%02d", i), cm)
			}
			controlplane.Eventually(t, 3*time.Minute, "the Sensor giving up every event", func() error {
				if got := strings.Count(sensor.Logs(), exhaustedLog); got < n {
					return fmt.Errorf("%d of %d events exhausted", got, n)
				}
				return nil
			})
			pending := sensorPending(t, r.e)
			t.Logf("outage: the Sensor gave up %d events after %s; left on its consumer: %d", n, time.Since(began).Round(time.Millisecond), pending)
			if pending != 0 {
				t.Errorf("the Sensor left %d messages unacknowledged; want 0 (it acknowledges exhausted events)", pending)
			}
			if got := r.counter.Count("PATCH") - patches; got != 0 {
				t.Errorf("%d PATCHes during the outage; want 0", got)
			}
			grpcBefore := eventsCount(t, r.srv, "grpc", "")

			srvBefore := r.srv
			o.end(t, r)
			if r.srv != srvBefore {
				grpcBefore = 0 // a new service counts from zero
			}
			ended := time.Now()
			for cm, rs := range rss {
				r.e.waitOwned(cm, rs.Name, rs.UID)
			}
			t.Logf("repaired: %d/%d attached %s after the outage ended", n, n, time.Since(ended).Round(time.Millisecond))
			checkWrittenOnce(t, changes, cms)
			if got := r.counter.Count("PATCH") - patches; got != n {
				t.Errorf("%d PATCHes; want %d (one per revision)", got, n)
			}
			if got := eventsCount(t, r.srv, "grpc", "") - grpcBefore; got != 0 {
				t.Errorf("%d gRPC events after the outage; want 0 (the Sensor acknowledged them; the repair is the service's)", got)
			}
		})
	}
}

// outageRig is one outage test's world: the env with the shipped EventSource running and
// the service (gRPC on a fixed port, so a restarted one is where the Sensor dials; its
// apiserver connection through proxy; its requests counted).
type outageRig struct {
	e       *env
	proxy   *testfix.CutProxy
	counter *kube.RequestCounter
	srv     *server.Server
	stop    func()
}

func newOutageRig(t *testing.T) *outageRig {
	t.Helper()
	e := newEnv(t)
	r := &outageRig{e: e, proxy: testfix.NewCutProxy(t, apiserverHostPort(t, e.cp.RESTConfig().Host)), counter: &kube.RequestCounter{}}
	r.start(t)
	e.grpcAddr = r.srv.GRPCAddr()
	e.start(argoevents.Config{EventSource: e.eventSource()}, eventSourceReady)
	return r
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

// start runs the service (gRPC, no --watch; on the address of the previous one if any)
// and waits until its caches have synced; the revision side resyncs every 2 s.
func (r *outageRig) start(t *testing.T) {
	t.Helper()
	cfg := r.counter.Wrap(r.e.cp.RESTConfig())
	cfg.Host = "https://" + r.proxy.Addr()
	grpcAddr := "127.0.0.1:0"
	if r.srv != nil {
		grpcAddr = r.srv.GRPCAddr()
	}
	srv, err := server.New(cfg, server.Options{GRPCAddr: grpcAddr, HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		ProbeInterval: 200 * time.Millisecond, Ingress: server.Ingress{WatchResync: 2 * time.Second}})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(r.e.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	var once sync.Once
	r.srv, r.stop = srv, func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server.Run: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	if err := srv.Cache().WaitForSync(r.e.ctx); err != nil {
		t.Fatalf("server caches: %v", err)
	}
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
