package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return testfix.Quiet()
}

// startServer runs a Server on loopback against the control plane and waits for /readyz.
func startServer(t *testing.T, o server.Options, counter *kube.RequestCounter, scheme string, client *http.Client) *server.Server {
	t.Helper()
	cfg := controlplane.Require(t, cp).RESTConfig()
	if counter != nil {
		cfg = counter.Wrap(cfg)
	}
	o.GRPCAddr, o.HTTPAddr, o.Logger = "127.0.0.1:0", "127.0.0.1:0", logger(t)
	s, err := server.New(cfg, o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	controlplane.Eventually(t, 30*time.Second, "/readyz", func() error {
		resp, err := client.Get(scheme + "://" + s.HTTPAddr() + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
	return s
}

func TestServeAttachesOverGRPCAndHTTP(t *testing.T) {
	c := controlplane.Require(t, cp)
	ctx := context.Background()
	admin, err := kube.NewClients(c.RESTConfig())
	require.NoError(t, err)
	ns := "serve-attach"
	_, err = admin.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	// A Rollout with two ReplicaSets, each using its own opted-in ConfigMap revision.
	ro, err := admin.Dynamic.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app:1"}}}},
			"strategy": map[string]any{"canary": map[string]any{}},
		}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rsFor := map[string]*appsv1.ReplicaSet{}
	for _, rev := range []string{"a", "b"} {
		_, err := admin.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg-" + rev,
			Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{"k": strings.Repeat(rev, 1000)}}, metav1.CreateOptions{})
		require.NoError(t, err)
		labels := map[string]string{"app": "web", core.RolloutHashLabel: rev}
		rs, err := admin.Kube.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: "web-" + rev, Labels: labels, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: ro.GetUID(), Controller: ptr(true)}}},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-" + rev}}}}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		rsFor[rev] = rs
	}

	counter := &kube.RequestCounter{}
	s := startServer(t, server.Options{}, counter, "http", http.DefaultClient)
	conn, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	tc := triggers.NewTriggerClient(conn)

	eventData := func(rs *appsv1.ReplicaSet) []byte {
		body, err := json.Marshal(rs)
		require.NoError(t, err)
		return []byte(`{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","metadata":{"cluster":"in-cluster"},"body":` + string(body) + `}`)
	}
	// gRPC: the Sensor's sequence FetchResource → Execute → ApplyPolicy.
	viaGRPC := func(rs *appsv1.ReplicaSet) dispatch.Response {
		spec, err := tc.FetchResource(ctx, &triggers.FetchResourceRequest{Resource: []byte("operation: attach\ndiscover: \"true\"\n")})
		require.NoError(t, err)
		out, err := tc.Execute(ctx, &triggers.ExecuteRequest{Resource: spec.Resource, Payload: eventData(rs)})
		require.NoError(t, err)
		pol, err := tc.ApplyPolicy(ctx, &triggers.ApplyPolicyRequest{Request: out.Response})
		require.NoError(t, err)
		assert.True(t, pol.Success, pol.Message)
		var r dispatch.Response
		require.NoError(t, json.Unmarshal(out.Response, &r))
		return r
	}
	// HTTP: a structured-mode CloudEvent, spec in the query.
	viaHTTP := func(rs *appsv1.ReplicaSet) dispatch.Response {
		ce := `{"specversion":"1.0","id":"` + string(rs.UID) + `","source":"configmap-attacher","type":"resource","datacontenttype":"application/json","data":` + string(eventData(rs)) + `}`
		resp, err := http.Post("http://"+s.HTTPAddr()+"/?operation=attach", "application/cloudevents+json", strings.NewReader(ce))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, 200, resp.StatusCode, string(b))
		var r dispatch.Response
		require.NoError(t, json.Unmarshal(b, &r))
		return r
	}
	outcomeOf := func(r dispatch.Response) core.Outcome {
		require.Len(t, r.Objects, 1, r.Message)
		return r.Objects[0].Outcome
	}
	// The revision side sees both opted-in ConfigMaps when its caches start, so it may
	// attach a revision before the event arrives: either way the event's answer says the
	// ReplicaSet owns it.
	attachedOrAlready := func(o core.Outcome) {
		t.Helper()
		assert.Contains(t, []core.Outcome{core.OutcomeAttached, core.OutcomeAlreadyAttached}, o)
	}
	attachedOrAlready(outcomeOf(viaGRPC(rsFor["a"])))
	attachedOrAlready(outcomeOf(viaHTTP(rsFor["b"])))
	for _, rev := range []string{"a", "b"} {
		cm, err := admin.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "cfg-"+rev, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, cm.OwnerReferences, 1)
		assert.Equal(t, rsFor[rev].UID, cm.OwnerReferences[0].UID)
		assert.Equal(t, "ReplicaSet", cm.OwnerReferences[0].Kind)
		assert.False(t, *cm.OwnerReferences[0].Controller)
	}

	// Replay every event on both paths once the cache has seen the new owners: no write,
	// and no request at all (every read is served by the informers).
	controlplane.Eventually(t, 10*time.Second, "the cache to see the owners", func() error {
		for _, rev := range []string{"a", "b"} {
			m, err := s.Cache().ObjectMeta(ctx, core.KindConfigMap, ns, "cfg-"+rev)
			if err != nil {
				return err
			}
			if len(m.OwnerReferences) != 1 {
				return fmt.Errorf("cfg-%s has %d owners in the cache", rev, len(m.OwnerReferences))
			}
		}
		return nil
	})
	waitAttachedEvents(t, ns, "cfg-a", 1) // the recorder posts them after the writes
	waitAttachedEvents(t, ns, "cfg-b", 1)
	counter.Reset()
	for _, rev := range []string{"a", "b"} {
		assert.Equal(t, core.OutcomeAlreadyAttached, outcomeOf(viaGRPC(rsFor[rev])))
		assert.Equal(t, core.OutcomeAlreadyAttached, outcomeOf(viaHTTP(rsFor[rev])))
	}
	assert.Zero(t, counter.Writes(), "a replay writes nothing")
	assert.Zero(t, counter.Count(http.MethodGet), "a replay is served from the cache")

	// A hostile payload naming the ReplicaSet with another UID is refused; nothing changes.
	forged := rsFor["a"].DeepCopy()
	forged.UID = "forged-uid"
	_, err = tc.Execute(ctx, &triggers.ExecuteRequest{Resource: []byte(`{}`), Payload: eventData(forged)})
	assert.ErrorContains(t, err, "FailedPrecondition")
	assert.Zero(t, counter.Writes())

	// The real garbage collector deletes a revision once its ReplicaSet is gone.
	require.NoError(t, admin.Kube.AppsV1().ReplicaSets(ns).Delete(ctx, "web-a", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 60*time.Second, "the garbage collector to delete cfg-a", func() error {
		_, err := admin.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "cfg-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("cfg-a still exists (err %v)", err)
	})
	_, err = admin.Kube.CoreV1().ConfigMaps(ns).Get(ctx, "cfg-b", metav1.GetOptions{})
	assert.NoError(t, err, "cfg-b is still used by web-b")
}

func TestServeTLS(t *testing.T) {
	controlplane.Require(t, cp)
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	pool := x509.NewCertPool()
	pemBytes, err := os.ReadFile(certFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	s := startServer(t, server.Options{TLSCertFile: certFile, TLSKeyFile: keyFile}, nil, "https", client)

	// What a Sensor with secure: true and certSecret does: credentials from the cert file.
	creds, err := credentials.NewClientTLSFromFile(certFile, "")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(s.GRPCAddr())
	conn, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(creds))
	require.NoError(t, err)
	defer conn.Close()
	resp, err := triggers.NewTriggerClient(conn).FetchResource(context.Background(), &triggers.FetchResourceRequest{Resource: []byte("dryRun: true\n")})
	require.NoError(t, err)
	assert.Contains(t, string(resp.Resource), `"dryRun":"true"`)

	// Plain-text clients are refused.
	plain, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer plain.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = triggers.NewTriggerClient(plain).FetchResource(ctx, &triggers.FetchResourceRequest{})
	assert.Error(t, err)
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	certFile, keyFile, _ = testfix.SelfSigned(t, dir)
	return certFile, keyFile
}

func ptr[T any](v T) *T { return &v }
