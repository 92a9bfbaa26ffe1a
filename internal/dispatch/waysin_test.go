package dispatch_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/watch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

// The ways in, as the table runs them.
var ways = []dispatch.Path{dispatch.PathGRPC, dispatch.PathHTTP, dispatch.PathEventBus, dispatch.PathWatcher}

// waysCase is one input given to every way in; want is the answer class each must give.
type waysCase struct {
	name string
	// rs is the ReplicaSet the event names (the watcher's informer holds this object).
	rs *appsv1.ReplicaSet
	// cluster is the event's metadata.cluster (the watcher's cluster name).
	cluster string
	// spec is the trigger spec (gRPC resource, HTTP query, the subscription's and the
	// watcher's options).
	spec map[string]string
	want dispatch.Class
	// then checks the cluster, the dispatcher's counts and the fake sweeps after each
	// way in answered; rs is the ReplicaSet that way in was given.
	then func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, d *dispatch.Dispatcher)
}

// TestEveryWayInAnswersAlike runs the same cases through the gRPC custom trigger, the
// HTTP receiver, the EventBus subscription and the built-in watcher, each over its own
// dispatcher on the same clusters, and requires the same answer class on each (counted
// by the dispatcher's own metrics) and the same effect on the cluster.
func TestEveryWayInAnswersAlike(t *testing.T) {
	for _, allow := range []bool{true, false} {
		s := newStack(t, allow)
		for _, tc := range s.cases(t) {
			for _, w := range ways {
				t.Run(fmt.Sprintf("secrets-allowed=%t/%s/%s", allow, tc.name, w), func(t *testing.T) {
					tc := tc
					tc.rs = s.variant(t, tc.rs, w)
					got, d := s.run(t, w, tc)
					assert.Equal(t, tc.want, got, "answer class on %s", w)
					if tc.then != nil {
						tc.then(t, s, tc.rs, d)
					}
				})
			}
		}
	}
}

// stack is one cluster registry (the control plane as "home", plus a cluster whose
// apiserver is down), an EventBus, and fake sweeps, shared by every dispatcher.
type stack struct {
	allowSecrets bool
	kc           kubernetes.Interface
	reg          *cluster.Registry
	sweeps       *fakeSweeps
	nats         *natsserver.Server
	js           jetstream.JetStream
	ns           string
	n            int
}

func newStack(t *testing.T, allowSecrets bool) *stack {
	c := controlplane.Require(t, cp)
	s := &stack{allowSecrets: allowSecrets, kc: c.Client(), sweeps: &fakeSweeps{}, ns: fmt.Sprintf("ways-%t", allowSecrets)}
	testfix.CreateNamespace(t, s.kc, s.ns)
	testfix.CreateNamespace(t, s.kc, s.ns+"-denied")
	dead := &rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	var err error
	s.reg, err = cluster.New(cluster.Options{
		Clusters: []cluster.Spec{{Name: "home", Source: cluster.SourceHome, Config: c.RESTConfig()},
			{Name: "dead", Source: cluster.SourceKubeconfig, Config: dead}},
		Runtime: cluster.RuntimeOptions{AllowSecrets: allowSecrets,
			Namespaces: core.NamespacePolicy{Deny: append(core.DefaultExcludedNamespaces(""), s.ns+"-denied")}},
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: 500 * time.Millisecond, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.reg.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	controlplane.Eventually(t, 30*time.Second, "home ready, dead down", func() error {
		if !s.reg.Healthy("home") {
			return fmt.Errorf("home not healthy")
		}
		if _, err := s.reg.Attacher("dead"); err == nil {
			return fmt.Errorf("dead not probed yet")
		}
		return nil
	})
	s.startBus(t)
	return s
}

func (s *stack) startBus(t *testing.T) {
	var err error
	s.nats, err = natsserver.Start(context.Background(), natsserver.Options{})
	require.NoError(t, err)
	t.Cleanup(s.nats.Stop)
	nc, err := s.nats.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	s.js, err = jetstream.New(nc)
	require.NoError(t, err)
	_, err = s.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: eventbus.DefaultStream,
		Subjects: []string{eventbus.SubjectPrefix + ">"}})
	require.NoError(t, err)
}

// dispatcher is a fresh dispatcher over the stack's clusters, as serve builds it (its
// defaults follow --allow-secrets), with its own metrics.
func (s *stack) dispatcher(t *testing.T) *dispatch.Dispatcher {
	defaults := core.DefaultOptions()
	defaults.IncludeSecrets = s.allowSecrets
	d, err := dispatch.New(dispatch.Config{Clusters: s.reg, Sweeps: s.sweeps, Defaults: &defaults, Logger: testfix.Quiet(),
		ExecuteTimeout: 5 * time.Second})
	require.NoError(t, err)
	return d
}

// variant gives each way in its own copy of a case's ReplicaSet (same template, its own
// name and, for a created one, its own object), so every way in meets the same state.
func (s *stack) variant(t *testing.T, rs *appsv1.ReplicaSet, w dispatch.Path) *appsv1.ReplicaSet {
	if rs.UID != "" || rs.Annotations["test/create"] != "true" {
		return rs // a fixed object (missing, invalid, refused by UID)
	}
	cp := rs.DeepCopy()
	cp.Name = rs.Name + "-" + string(w)
	cp.Annotations = nil
	ctx := context.Background()
	if live, err := s.kc.AppsV1().ReplicaSets(cp.Namespace).Get(ctx, cp.Name, metav1.GetOptions{}); err == nil {
		return live // a later case about the same ReplicaSet (already attached)
	}
	live, err := s.kc.AppsV1().ReplicaSets(cp.Namespace).Create(ctx, cp, metav1.CreateOptions{})
	require.NoError(t, err)
	return live
}

// run sends tc through way w and returns the answer class the dispatcher gave (every
// event it handled must have the same class: a redelivery or requeue repeats it).
func (s *stack) run(t *testing.T, w dispatch.Path, tc waysCase) (dispatch.Class, *dispatch.Dispatcher) {
	d := s.dispatcher(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	stop := s.send(t, d, w, tc)
	defer stop()
	var classes map[string]float64
	controlplane.Eventually(t, 20*time.Second, "an answer on "+string(w), func() error {
		classes = results(t, d.Metrics().Registry, string(w))
		if len(classes) == 0 {
			return fmt.Errorf("no event counted yet")
		}
		return nil
	})
	require.Len(t, classes, 1, "every event of one input gets one class: %v", classes)
	for c := range classes {
		return dispatch.Class(c), d
	}
	return "", d
}

// send gives tc to way w over d and returns what stops that way in.
func (s *stack) send(t *testing.T, d *dispatch.Dispatcher, w dispatch.Path, tc waysCase) func() {
	switch w {
	case dispatch.PathGRPC:
		return s.sendGRPC(t, d, tc)
	case dispatch.PathHTTP:
		return s.sendHTTP(t, d, tc)
	case dispatch.PathEventBus:
		return s.sendEventBus(t, d, tc)
	}
	return s.sendWatcher(t, d, tc)
}

func (s *stack) payload(t *testing.T, tc waysCase, source string) []byte {
	_, body, err := event.ResourceEvent(source, "replicaset-add", "ADD", tc.rs, map[string]string{"cluster": tc.cluster})
	require.NoError(t, err)
	return body
}

func (s *stack) sendGRPC(t *testing.T, d *dispatch.Dispatcher, tc waysCase) func() {
	lis := bufconn.Listen(1 << 20)
	srv := trigger.NewGRPCServer(d, lis, trigger.GRPCOptions{ShutdownTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	}), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	spec, err := json.Marshal(tc.spec)
	require.NoError(t, err)
	_, _ = triggers.NewTriggerClient(conn).Execute(context.Background(),
		&triggers.ExecuteRequest{Resource: spec, Payload: s.payload(t, tc, "grpc")})
	return func() { _ = conn.Close(); cancel(); <-done }
}

func (s *stack) sendHTTP(t *testing.T, d *dispatch.Dispatcher, tc waysCase) func() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	h := trigger.NewHTTPServer(d, lis, trigger.HTTPOptions{})
	q := url.Values{}
	for k, v := range tc.spec {
		q.Set(k, v)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/?"+q.Encode(), bytes.NewReader(s.payload(t, tc, "http")))
	req.Header.Set("Content-Type", "application/json")
	h.Handler().ServeHTTP(rec, req)
	return func() { _ = lis.Close() }
}

func (s *stack) sendEventBus(t *testing.T, d *dispatch.Dispatcher, tc waysCase) func() {
	s.n++
	source := fmt.Sprintf("ways-%t-%d", s.allowSecrets, s.n)
	opts, err := d.ParseSpec(tc.spec)
	require.NoError(t, err)
	sub, err := eventbus.NewSubscriber(eventbus.SubscriberOptions{URL: s.nats.ClientURL(), TLS: eventbus.TLS{CAFile: s.nats.CAFile()},
		Durable: source, EventSourceName: source, Options: &opts, Logger: testfix.Quiet(), Registerer: prometheus.NewRegistry(),
		NakDelay: 100 * time.Millisecond, MaxNakDelay: 200 * time.Millisecond, DeliverAll: true}, d)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sub.Run(ctx) }()
	msg := &nats.Msg{Subject: eventbus.SubjectPrefix + source + ".replicaset-add", Data: s.payload(t, tc, source)}
	_, err = s.js.PublishMsg(context.Background(), msg)
	require.NoError(t, err)
	return func() { cancel(); <-done }
}

func (s *stack) sendWatcher(t *testing.T, d *dispatch.Dispatcher, tc waysCase) func() {
	src := fcache.NewFakeControllerSource()
	src.Add(tc.rs.DeepCopy())
	inf := toolscache.NewSharedIndexInformer(src, &appsv1.ReplicaSet{}, 0, toolscache.Indexers{})
	opts, err := d.ParseSpec(tc.spec)
	require.NoError(t, err)
	w, err := watch.NewReplicaSets(inf, d, watch.Options{Cluster: tc.cluster, Options: &opts, Resync: -1, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); inf.Run(ctx.Done()) }()
	go func() { defer wg.Done(); _ = w.Run(ctx) }()
	return func() { cancel(); wg.Wait() }
}

// results returns events_total's result values (with a count) for path ("*": any).
func results(t *testing.T, reg *prometheus.Registry, path string) map[string]float64 {
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "configmap_attacher_events_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if (path == "*" || labels["path"] == path) && m.GetCounter().GetValue() > 0 {
				out[labels["result"]] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// fakeSweeps records the sweeps the dispatchers ask for.
type fakeSweeps struct {
	mu    sync.Mutex
	swept []string // cluster/namespace of `operation: gc`
	after []string // cluster/namespace of the sweep after an attach
}

func (f *fakeSweeps) Sweep(_ context.Context, cluster, ns string, _ bool) (*gc.Report, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.swept = append(f.swept, cluster+"/"+ns)
	return &gc.Report{}, nil
}

func (f *fakeSweeps) AfterAttach(cluster, ns string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.after = append(f.after, cluster+"/"+ns)
}

func (f *fakeSweeps) count(list *[]string, want string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range *list {
		if s == want {
			n++
		}
	}
	return n
}

// owners returns the UIDs of the owners of a ConfigMap or Secret.
func (s *stack) owners(t *testing.T, kind core.Kind, name string) []types.UID {
	var refs []metav1.OwnerReference
	if kind == core.KindSecret {
		o, err := s.kc.CoreV1().Secrets(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		refs = o.OwnerReferences
	} else {
		o, err := s.kc.CoreV1().ConfigMaps(s.ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		refs = o.OwnerReferences
	}
	var uids []types.UID
	for _, r := range refs {
		uids = append(uids, r.UID)
	}
	return uids
}

func (s *stack) rsUID(t *testing.T, ns, name string) types.UID {
	rs, err := s.kc.AppsV1().ReplicaSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return rs.UID
}

// template returns a ReplicaSet (to be created per way in) in ns whose template mounts
// ConfigMap cm and, when secret is set, Secret secret.
func template(ns, name, cm, secret string) *appsv1.ReplicaSet {
	rs := testfix.ReplicaSet(name, cm)
	rs.Namespace = ns
	rs.Annotations = map[string]string{"test/create": "true"}
	if secret != "" {
		rs.Spec.Template.Spec.Volumes = append(rs.Spec.Template.Spec.Volumes, corev1.Volume{Name: "sec",
			VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
	}
	return rs
}

// objects returns objects_total's count for outcome.
func objects(t *testing.T, d *dispatch.Dispatcher, outcome core.Outcome) float64 {
	mfs, err := d.Metrics().Registry.Gather()
	require.NoError(t, err)
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "configmap_attacher_objects_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == string(outcome) {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// cases builds the objects the cases need and returns the table.
func (s *stack) cases(t *testing.T) []waysCase {
	ctx := context.Background()
	for _, cm := range []string{"cfg-attach", "cfg-other", "cfg-fixed"} {
		_, err := s.kc.CoreV1().ConfigMaps(s.ns).Create(ctx, testfix.Revision(s.ns, cm), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := s.kc.CoreV1().Secrets(s.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec-1", Namespace: s.ns,
		Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	fixed := testfix.CreateReplicaSet(t, s.kc, s.ns, "fixed", "cfg-fixed") // its own revision: no other case's attach adds it
	wrongUID := fixed.DeepCopy()
	wrongUID.UID = "00000000-0000-0000-0000-00000000dead"
	dying := testfix.ReplicaSet("dying", "cfg-other")
	dying.Finalizers = []string{"test.configmap-attacher.io/hold"}
	dying, err = s.kc.AppsV1().ReplicaSets(s.ns).Create(ctx, dying, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, s.kc.AppsV1().ReplicaSets(s.ns).Delete(ctx, "dying", metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = s.kc.AppsV1().ReplicaSets(s.ns).Patch(ctx, "dying", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	for _, cm := range []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: s.ns}},
		{ObjectMeta: metav1.ObjectMeta{Name: "cfg-locked", Namespace: s.ns, Labels: map[string]string{core.LabelRevision: "true", "cma-test-deny": "true"}}},
	} {
		_, err := s.kc.CoreV1().ConfigMaps(s.ns).Create(ctx, cm, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	denyUpdates(t, s.kc, s.ns)
	invalid := testfix.ReplicaSet("x", "cfg-other")
	invalid.Namespace, invalid.UID = "Not_A_Namespace", "u1"
	ownedBy := func(kind core.Kind, name string, want bool) func(*testing.T, *stack, *appsv1.ReplicaSet, *dispatch.Dispatcher) {
		return func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, _ *dispatch.Dispatcher) {
			assert.Equal(t, want, containsUID(s.owners(t, kind, name), s.rsUID(t, rs.Namespace, rs.Name)), "%s %s owned by %s", kind, name, rs.Name)
		}
	}
	return []waysCase{
		{name: "attach", rs: template(s.ns, "attach", "cfg-attach", ""), cluster: "home", want: dispatch.ClassOK,
			then: func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, d *dispatch.Dispatcher) {
				ownedBy(core.KindConfigMap, "cfg-attach", true)(t, s, rs, d)
				assert.Equal(t, 1.0, objects(t, d, core.OutcomeAttached))
				assert.Positive(t, s.sweeps.count(&s.sweeps.after, "home/"+s.ns), "the sweep after an attach")
			}},
		{name: "already attached", rs: template(s.ns, "attach", "cfg-attach", ""), cluster: "home", want: dispatch.ClassOK,
			then: func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, d *dispatch.Dispatcher) {
				assert.Zero(t, objects(t, d, core.OutcomeAttached), "no write")
				assert.Positive(t, objects(t, d, core.OutcomeAlreadyAttached))
			}},
		{name: "secret", rs: template(s.ns, "secret", "cfg-other", "sec-1"), cluster: "home", want: dispatch.ClassOK,
			then: ownedBy(core.KindSecret, "sec-1", s.allowSecrets)},
		{name: "uid mismatch", rs: wrongUID, cluster: "home", want: dispatch.ClassRefused,
			then: func(t *testing.T, s *stack, _ *appsv1.ReplicaSet, d *dispatch.Dispatcher) {
				ownedBy(core.KindConfigMap, "cfg-fixed", false)(t, s, fixed, d)
			}},
		{name: "terminating", rs: alive(dying), cluster: "home", want: dispatch.ClassRefused},
		{name: "denied namespace", rs: template(s.ns+"-denied", "denied", "cfg-other", ""), cluster: "home", want: dispatch.ClassRefused},
		{name: "invalid", rs: invalid, cluster: "home", want: dispatch.ClassInvalid},
		{name: "unknown cluster", rs: template(s.ns, "unknown", "cfg-other", ""), cluster: "nope", want: dispatch.ClassInvalid},
		{name: "cluster down", rs: template(s.ns, "down", "cfg-other", ""), cluster: "dead", want: dispatch.ClassUnavailable},
		{name: "spec names an unlabelled unreferenced ConfigMap", rs: template(s.ns, "listed", "cfg-other", ""), cluster: "home",
			spec: map[string]string{"configMaps": "plain"}, want: dispatch.ClassOK, then: ownedBy(core.KindConfigMap, "plain", false)},
		{name: "kube-system by default", rs: template("kube-system", "system", "extension-apiserver-authentication", ""), cluster: "home",
			want: dispatch.ClassRefused},
		{name: "operation gc in kube-system", rs: template("kube-system", "system-gc", "x", ""), cluster: "home",
			spec: map[string]string{"operation": "gc"}, want: dispatch.ClassRefused,
			then: func(t *testing.T, s *stack, _ *appsv1.ReplicaSet, _ *dispatch.Dispatcher) {
				assert.Zero(t, s.sweeps.count(&s.sweeps.swept, "home/kube-system"))
			}},
		{name: "admission denies the write", rs: template(s.ns, "locked", "cfg-locked", ""), cluster: "home", want: dispatch.ClassPermanent,
			then: func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, d *dispatch.Dispatcher) {
				assert.Equal(t, map[string]float64{string(dispatch.ClassPermanent): 1}, results(t, d.Metrics().Registry, "*"), "answered once, not retried")
				controlplane.Eventually(t, 10*time.Second, "a Warning Event on the ReplicaSet", func() error {
					evs, err := s.kc.CoreV1().Events(rs.Namespace).List(context.Background(), metav1.ListOptions{
						FieldSelector: "involvedObject.name=" + rs.Name + ",reason=" + core.ReasonGivenUp})
					if err != nil || len(evs.Items) == 0 {
						return fmt.Errorf("no %s Event yet (%v)", core.ReasonGivenUp, err)
					}
					return nil
				})
			}},
		{name: "operation gc", rs: template(s.ns, "gc", "cfg-other", ""), cluster: "home", spec: map[string]string{"operation": "gc"},
			want: dispatch.ClassOK, then: func(t *testing.T, s *stack, rs *appsv1.ReplicaSet, d *dispatch.Dispatcher) {
				assert.Positive(t, s.sweeps.count(&s.sweeps.swept, "home/"+s.ns))
				ownedBy(core.KindConfigMap, "cfg-other", false)(t, s, rs, d)
			}},
	}
}

// alive is rs as an event (or a lagging cache) saw it before its deletion began.
func alive(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	out := rs.DeepCopy()
	out.DeletionTimestamp, out.DeletionGracePeriodSeconds = nil, nil
	return out
}

func containsUID(uids []types.UID, uid types.UID) bool {
	for _, u := range uids {
		if u == uid {
			return true
		}
	}
	return false
}

// denyUpdates installs a ValidatingAdmissionPolicy that denies every update of a
// ConfigMap labelled cma-test-deny in ns, and waits until the apiserver enforces it.
func denyUpdates(t *testing.T, kc kubernetes.Interface, ns string) {
	ctx := context.Background()
	fail := admissionv1.Fail
	name := "deny-" + ns
	_, err := kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionv1.Validation{{Expression: "!has(object.metadata.labels) || !('cma-test-deny' in object.metadata.labels)",
				Message: "test policy: this ConfigMap may not change"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "the policy to be enforced", func() error {
		_, err := kc.CoreV1().ConfigMaps(ns).Patch(ctx, "cfg-locked", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"probe":"`+time.Now().Format(time.RFC3339Nano)+`"}}}`), metav1.PatchOptions{})
		if err == nil {
			return fmt.Errorf("not enforced yet")
		}
		return nil
	})
}
