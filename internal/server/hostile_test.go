package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/nats-io/nats.go/jetstream"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// hostileEnv is a served namespace with one ReplicaSet using an opted-in ConfigMap and
// an opted-in Secret, the same in kube-system, a server restricted to the namespace
// (kube-system denied, Secrets not enabled) with all three ingress paths, and a counter
// of every API request the server makes.
type hostileEnv struct {
	ns       string
	kc       kubernetes.Interface
	rs, sys  *appsv1.ReplicaSet
	counter  *kube.RequestCounter
	srv      *server.Server
	logs     *testfix.SyncBuffer
	grpc     triggers.TriggerClient
	js       jetstream.JetStream
	natsPass string
}

func newHostileEnv(t *testing.T, ns string) *hostileEnv {
	t.Helper()
	c := controlplane.Require(t, cp)
	ctx := context.Background()
	e := &hostileEnv{ns: ns, kc: c.Client(), counter: &kube.RequestCounter{}, logs: &testfix.SyncBuffer{}, natsPass: "nats-pw-" + ns}
	_, err := e.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.rs = e.workload(t, ns, "web-1", "cfg-1", "sec-1")
	e.sys = e.workload(t, "kube-system", ns+"-sys", ns+"-sys-cfg", "")
	// kube-system outlives the test: remove its workload, or the next test's server
	// (which serves every namespace) attaches it and counts that write as its own.
	t.Cleanup(func() {
		_ = e.kc.AppsV1().ReplicaSets("kube-system").Delete(ctx, e.sys.Name, metav1.DeleteOptions{})
		_ = e.kc.CoreV1().ConfigMaps("kube-system").Delete(ctx, ns+"-sys-cfg", metav1.DeleteOptions{})
	})

	nats, err := natsserver.Start(ctx, natsserver.Options{User: "attacher", Password: e.natsPass})
	require.NoError(t, err)
	t.Cleanup(nats.Stop)
	nc, err := nats.Connect()
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	e.js, err = jetstream.New(nc)
	require.NoError(t, err)
	_, err = e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)

	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.srv, err = server.New(e.counter.Wrap(c.RESTConfig()), server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: log,
		MaxBodyBytes: 1 << 20, Namespaces: core.NamespacePolicy{Allow: []string{ns}, Deny: []string{"kube-system"}},
		Ingress: server.Ingress{WatchResync: time.Hour, EventBus: &eventbus.SubscriberOptions{URL: nats.ClientURL(),
			Auth: eventbus.Auth{User: "attacher", Password: e.natsPass}, TLS: eventbus.TLS{CAFile: nats.CAFile()},
			DeliverAll: true, NakDelay: 200 * time.Millisecond}}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.srv.Run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	controlplane.Eventually(t, 30*time.Second, "ready", func() error {
		if !e.srv.Ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	conn, err := grpc.NewClient(e.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(16<<20)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	e.grpc = triggers.NewTriggerClient(conn)
	return e
}

// workload creates an opted-in ConfigMap (and Secret, when secret is set) and a
// ReplicaSet using them in ns.
func (e *hostileEnv) workload(t *testing.T, ns, rsName, cmName, secret string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	optIn := map[string]string{core.LabelRevision: "true"}
	_, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName, Labels: optIn},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	env := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cmName}}}}
	if secret != "" {
		_, err := e.kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Labels: optIn},
			StringData: map[string]string{"password": "do-not-log-me"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		env = append(env, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}})
	}
	zero := int32(0)
	labels := map[string]string{"app": rsName}
	rs, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: rsName},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: env}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return rs
}

// eventData is Argo Events' resource event data for a ReplicaSet ADD.
func eventData(ns, name, uid string) string {
	return `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","body":{"apiVersion":"apps/v1","kind":"ReplicaSet",` +
		`"metadata":{"name":"` + name + `","namespace":"` + ns + `","uid":"` + uid + `"}}}`
}

func deepJSON(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }

// owners returns the ownerReference names of a ConfigMap or Secret.
func (e *hostileEnv) owners(t *testing.T, kind core.Kind, ns, name string) []string {
	t.Helper()
	var refs []metav1.OwnerReference
	if kind == core.KindSecret {
		s, err := e.kc.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		refs = s.OwnerReferences
	} else {
		cm, err := e.kc.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		require.NoError(t, err)
		refs = cm.OwnerReferences
	}
	var out []string
	for _, r := range refs {
		out = append(out, r.Name)
	}
	return out
}

// hostileCase is one bad input, as sent on each edge.
type hostileCase struct {
	name    string
	query   string // HTTP query (trigger spec keys)
	spec    string // gRPC spec document
	payload string
	// Expected answers: HTTP status, gRPC code, and a phrase of the error naming the problem.
	httpStatus int
	grpcCode   codes.Code
	errText    string
	// grpcErrText, when set, replaces errText on gRPC (whose own limits answer first).
	grpcErrText string
	// onBus: also published on the EventBus (payload problems only; the EventBus spec is fixed).
	onBus bool
}

func hostileCases(e *hostileEnv) []hostileCase {
	ok := eventData(e.ns, "web-1", string(e.rs.UID))
	long := strings.Repeat("a", 254)
	return []hostileCase{
		{name: "oversized body", payload: `{"pad":"` + strings.Repeat("x", 4<<20) + `"}`, httpStatus: 413, grpcCode: codes.ResourceExhausted, errText: "bytes", grpcErrText: "larger than max"},
		{name: "deep JSON", payload: deepJSON(10000), httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "deep", onBus: true},
		{name: "invalid UTF-8 in the payload", payload: eventData(e.ns, "web-\xff\xfe", ""), httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "UTF-8", onBus: true},
		{name: "invalid UTF-8 in the spec", query: "configMaps=%ff%fe", spec: "configMaps: \"\xff\xfe\"", payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "configMaps", grpcErrText: "UTF-8"},
		{name: "ReplicaSet name over 253 characters", payload: eventData(e.ns, long, ""), httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "name", onBus: true},
		{name: "listed name over 253 characters", query: "configMaps=" + long, spec: "configMaps: " + long, payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "configMaps"},
		{name: "label-selector injection", query: "selector=" + "configmap-attacher.io%2Frevision%3Dtrue)%7C(a", spec: `selector: "configmap-attacher.io/revision=true)|(a"`, payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "selector"},
		{name: "label-selector with a newline", query: "selector=a%3Db%0Ac%3Dd", spec: `selector: "a=b\nc=d"`, payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "selector"},
		{name: "forged UID", payload: eventData(e.ns, "web-1", "11111111-2222-3333-4444-555555555555"), httpStatus: 409, grpcCode: codes.FailedPrecondition, errText: "UID", onBus: true},
		{name: "cross-namespace reference", query: "configMaps=kube-system/" + e.ns + "-sys-cfg", spec: "configMaps: kube-system/" + e.ns + "-sys-cfg", payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "cross-namespace"},
		{name: "kube-system target when namespaces are restricted", payload: eventData("kube-system", e.sys.Name, string(e.sys.UID)), httpStatus: 409, grpcCode: codes.FailedPrecondition, errText: "kube-system", onBus: true},
		{name: "namespace outside the allow list", payload: eventData("default", "web-1", ""), httpStatus: 409, grpcCode: codes.FailedPrecondition, errText: "not among the namespaces", onBus: true},
		{name: "gc of kube-system", query: "operation=gc&namespace=kube-system", spec: "operation: gc\nnamespace: kube-system", payload: ok, httpStatus: 409, grpcCode: codes.FailedPrecondition, errText: "kube-system"},
		{name: "unknown spec key", query: "owner=me", spec: "owner: me", payload: ok, httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "owner"},
		{name: "not JSON", payload: "\x00\x01garbage", httpStatus: 400, grpcCode: codes.InvalidArgument, errText: "JSON", onBus: true},
	}
}

// TestHostileInputRefused sends every hostile input on the HTTP and gRPC edges and the
// EventBus: each is refused with an error naming the problem, and the server makes no
// write at all (counted on its own API client); the revisions keep no owner. A valid
// event afterwards attaches (one write), so the counter does see writes.
func TestHostileInputRefused(t *testing.T) {
	e := newHostileEnv(t, "hostile")
	ctx := context.Background()
	cases := hostileCases(e)
	refused := 0
	// The revision side attaches cfg-1 to web-1 at start (safety rule 9); after that,
	// nothing a hostile input says may write anything.
	controlplane.Eventually(t, 15*time.Second, "cfg-1 attached at start", func() error {
		if got := e.owners(t, core.KindConfigMap, e.ns, "cfg-1"); len(got) != 1 {
			return fmt.Errorf("owners %v", got)
		}
		return nil
	})
	waitAttachedEvents(t, e.ns, "cfg-1", 1) // posted after the write, on the recorder's goroutine
	e.counter.Reset()
	for _, tc := range cases {
		t.Run("http/"+tc.name, func(t *testing.T) {
			resp, err := http.Post("http://"+e.srv.HTTPAddr()+"/?"+tc.query, "application/json", strings.NewReader(tc.payload))
			require.NoError(t, err)
			defer resp.Body.Close()
			var body bytes.Buffer
			_, _ = body.ReadFrom(resp.Body)
			assert.Equal(t, tc.httpStatus, resp.StatusCode, body.String())
			assert.Contains(t, body.String(), tc.errText)
			assert.Less(t, body.Len(), 4096, "the error clips the input it echoes")
			assert.Zero(t, e.counter.Writes(), "no write")
			refused++
		})
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			_, err := e.grpc.Execute(ctx, &triggers.ExecuteRequest{Resource: []byte(tc.spec), Payload: []byte(tc.payload)})
			require.Error(t, err)
			st := status.Convert(err)
			assert.Equal(t, tc.grpcCode, st.Code(), st.Message())
			want := tc.errText
			if tc.grpcErrText != "" {
				want = tc.grpcErrText
			}
			assert.Contains(t, st.Message(), want)
			assert.Less(t, len(st.Message()), 4096, "the error clips the input it echoes")
			assert.Zero(t, e.counter.Writes(), "no write")
			refused++
		})
	}
	t.Run("http/the runtime's profiles are not on the receiver", func(t *testing.T) {
		resp, err := http.Get("http://" + e.srv.HTTPAddr() + "/debug/pprof/heap")
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	})
	t.Run("eventbus", func(t *testing.T) {
		n := 0
		for _, tc := range cases {
			if !tc.onBus {
				continue
			}
			_, err := e.js.Publish(ctx, "default.replicasets.replicaset-add", []byte(tc.payload))
			require.NoError(t, err, tc.name)
			n++
		}
		controlplane.Eventually(t, 30*time.Second, "every hostile message terminated", func() error {
			if got := busCount(t, e.srv, "term"); got != n {
				return fmt.Errorf("%d of %d terminated", got, n)
			}
			return nil
		})
		for _, tc := range cases {
			if tc.onBus {
				assert.Contains(t, e.logs.String(), tc.errText, "the Term reason names the problem (%s)", tc.name)
			}
		}
		assert.Zero(t, e.counter.Writes(), "no write")
		refused += n
	})
	for _, obj := range []struct {
		kind     core.Kind
		ns, name string
	}{{core.KindSecret, e.ns, "sec-1"}, {core.KindConfigMap, "kube-system", e.ns + "-sys-cfg"}} {
		assert.Empty(t, e.owners(t, obj.kind, obj.ns, obj.name), "%s %s/%s untouched", obj.kind, obj.ns, obj.name)
	}
	assert.Equal(t, []string{"web-1"}, e.owners(t, core.KindConfigMap, e.ns, "cfg-1"), "cfg-1 untouched")
	t.Logf("hostile inputs refused: %d (HTTP, gRPC, EventBus); writes: %d", refused, e.counter.Writes())

	// Control: a valid event for a new ReplicaSet of cfg-1 writes exactly once, and never
	// the Secret (not enabled).
	web2 := testfix.ReplicaSet("web-2", "cfg-1")
	web2.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "sec-1"}}}}
	web2, err := e.kc.AppsV1().ReplicaSets(e.ns).Create(ctx, web2, metav1.CreateOptions{})
	require.NoError(t, err)
	resp, err := http.Post("http://"+e.srv.HTTPAddr()+"/?includeSecrets=true", "application/json", strings.NewReader(eventData(e.ns, "web-2", string(web2.UID))))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	assert.Equal(t, 1, e.counter.Count(http.MethodPatch), "one write: cfg-1")
	assert.ElementsMatch(t, []string{"web-1", "web-2"}, e.owners(t, core.KindConfigMap, e.ns, "cfg-1"))
	assert.Empty(t, e.owners(t, core.KindSecret, e.ns, "sec-1"), "Secrets are never touched unless enabled")
	assert.NotContains(t, e.logs.String(), "do-not-log-me", "Secret data is never logged")
	assert.NotContains(t, e.logs.String(), e.natsPass, "the EventBus password is never logged")
}

// busCount returns configmap_attacher_eventbus_messages_total{result}.
func busCount(t *testing.T, s *server.Server, result string) int {
	t.Helper()
	mfs, err := s.Dispatcher().Metrics().Registry.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "configmap_attacher_eventbus_messages_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "result") == result {
				return int(m.GetCounter().GetValue())
			}
		}
	}
	return 0
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
