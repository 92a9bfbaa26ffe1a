package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestAPIServerRestartNotReadyThenCatchesUp runs its own control plane (it stops that
// kube-apiserver) and a single-cluster `serve --watch`:
//   - while kube-apiserver is down, /readyz answers 503 naming the cluster and an HTTP
//     event is answered 503 (retry later) at once, without waiting for a timeout;
//   - after kube-apiserver is back, the service is ready again by itself, the event
//     retried as a Sensor does succeeds, and a ReplicaSet created after the restart is
//     attached by the watcher (its watch re-established): it catches up.
//
// Bounded: about 30 s of control-plane time.
func TestAPIServerRestartNotReadyThenCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own control plane")
	}
	ctx := context.Background()
	c, err := controlplane.Start(ctx, controlplane.Options{Name: "restart", Logf: t.Logf, SkipCRDs: true})
	require.NoError(t, err, "the control plane (run `make tools`)")
	t.Cleanup(func() { _ = c.Stop() })
	kc := c.Client()
	const ns = "restart"
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	srv, err := server.New(c.RESTConfig(), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", Logger: logger(t),
		ClusterName: "home", ProbeInterval: 250 * time.Millisecond, ShutdownTimeout: 5 * time.Second,
		HTTPToken: []byte(detailToken), PublicMetrics: true, Ingress: server.Ingress{Watch: true, WatchResync: time.Hour}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	base := "http://" + srv.HTTPAddr()
	readyz := func() (int, string) { return getReadyz(srv.HTTPAddr()) }
	waitReady := func(what string) {
		controlplane.Eventually(t, 60*time.Second, what, func() error {
			if code, body := readyz(); code != http.StatusOK {
				return fmt.Errorf("/readyz %d: %s", code, body)
			}
			return nil
		})
	}
	waitReady("ready")

	before := restartWorkload(t, kc, ns, "before")
	waitOwned(t, kc, ns, "cfg-before", before)

	// kube-apiserver goes away: not ready, naming the cluster and the reason.
	require.NoError(t, c.StopAPIServer())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = c.RestartAPIServer(ctx)
		}
	})
	controlplane.Eventually(t, 15*time.Second, "/readyz to report the cluster down", func() error {
		code, body := readyz()
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "home") || !strings.Contains(body, "DOWN") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	code, body := readyz()
	t.Logf("while kube-apiserver is down: /readyz %d: %s", code, strings.TrimSpace(body))

	// An event now is answered "retry later" at once.
	post := func() (int, string, time.Duration) {
		start := time.Now()
		req, err := http.NewRequest(http.MethodPost, base+"/", strings.NewReader(eventData(ns, before.Name, string(before.UID))))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+detailToken)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), time.Since(start)
	}
	st, msg, took := post()
	assert.Equal(t, http.StatusServiceUnavailable, st, msg)
	t.Logf("event while down: %d in %s: %s", st, took.Round(time.Millisecond), strings.TrimSpace(msg))

	// Back: ready by itself, the retried event succeeds, new ReplicaSets are attached.
	require.NoError(t, c.RestartAPIServer(ctx))
	restarted = true
	waitReady("ready again after the restart")
	controlplane.Eventually(t, 30*time.Second, "the retried event to succeed", func() error {
		if st, msg, _ := post(); st != http.StatusOK {
			return fmt.Errorf("%d: %s", st, msg)
		}
		return nil
	})
	after := restartWorkload(t, kc, ns, "after")
	waitOwned(t, kc, ns, "cfg-after", after)
	// Nothing was lost or changed wrongly: the first revision still has exactly its owner.
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "cfg-before", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, before.UID, cm.OwnerReferences[0].UID)

	// Watcher attaches show in the same metrics as trigger events.
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	assert.Contains(t, string(b), `configmap_attacher_events_total{cluster="home",path="watcher",result="ok"}`)
	assert.Contains(t, string(b), `configmap_attacher_objects_total{cluster="home",outcome="attached"}`)
}

// restartWorkload creates opted-in ConfigMap cfg-<name> and a ReplicaSet <name> using it.
func restartWorkload(t *testing.T, kc kubernetes.Interface, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg-" + name,
		Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	zero := int32(0)
	labels := map[string]string{"app": name}
	envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-" + name}}}}
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: envFrom}}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	return rs
}

// waitOwned waits until ConfigMap cm is owned by rs.
func waitOwned(t *testing.T, kc kubernetes.Interface, ns, cm string, rs *appsv1.ReplicaSet) {
	t.Helper()
	controlplane.Eventually(t, 60*time.Second, cm+" owned by "+rs.Name, func() error {
		got, err := kc.CoreV1().ConfigMaps(ns).Get(context.Background(), cm, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, o := range got.OwnerReferences {
			if o.UID == rs.UID {
				return nil
			}
		}
		return fmt.Errorf("owners %v", got.OwnerReferences)
	})
}
