package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// A cluster's runtime with Secrets allowed caches, reads and patches Secrets as metadata
// only: attaching an opted-in Secret, no answer of the cluster to the service carries
// the Secret's data (docs/design.md, "Per-cluster cost").
func TestSecretDataNeverReachesTheRuntime(t *testing.T) {
	cp := cpA
	if cp == nil {
		t.Skip("integration test: needs the local control plane (not started with -short)")
	}
	ctx := context.Background()
	ns := fmt.Sprintf("secret-data-%d", time.Now().UnixNano())
	secret := fmt.Sprintf("never-in-memory-%d", time.Now().UnixNano())
	rs := secretFixture(t, cp, ns, "sec", secret)

	cfg := rest.CopyConfig(cp.RESTConfig())
	seen := &secretSeen{needles: [][]byte{[]byte(secret), []byte(base64.StdEncoding.EncodeToString([]byte(secret)))}}
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return seen.wrap(next) })
	rt, err := NewRuntime(Spec{Name: "a", Config: cfg}, RuntimeOptions{Namespace: ns, AllowSecrets: true})
	require.NoError(t, err)
	runSynced(t, rt)

	opts := core.DefaultOptions()
	opts.IncludeSecrets = true
	res, err := rt.Attacher.Attach(ctx, core.Event{Namespace: ns, Name: rs.Name, UID: rs.UID, Options: opts})
	require.NoError(t, err, "%+v", res)
	s, err := cp.Client().CoreV1().Secrets(ns).Get(ctx, "sec", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, s.OwnerReferences, 1, "the Secret was attached")
	assert.Equal(t, rs.UID, s.OwnerReferences[0].UID)
	assert.False(t, seen.found.Load(), "an answer to the runtime carried the Secret's data")
}

// secretFixture creates namespace ns, an opted-in Secret name holding value and a
// ReplicaSet using it through envFrom.
func secretFixture(t *testing.T, cp *controlplane.ControlPlane, ns, name, value string) *appsv1.ReplicaSet {
	t.Helper()
	ctx, kc := context.Background(), cp.Client()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{core.LabelRevision: "true"}}, StringData: map[string]string{"token": value}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels, zero := map[string]string{"app": "web"}, int32(0)
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app:1", EnvFrom: []corev1.EnvFromSource{
					{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return rs
}

// secretSeen records whether any response body read through it contains a needle.
type secretSeen struct {
	needles [][]byte
	found   atomic.Bool
}

func (s *secretSeen) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err == nil && resp.Body != nil {
			resp.Body = &scanBody{ReadCloser: resp.Body, seen: s}
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// scanBody keeps what was read of a body and looks for the needles in it.
type scanBody struct {
	io.ReadCloser
	seen *secretSeen
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (b *scanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p[:n])
	for _, nd := range b.seen.needles {
		if bytes.Contains(b.buf.Bytes(), nd) {
			b.seen.found.Store(true)
		}
	}
	return n, err
}

// runSynced runs rt until t ends and waits until its caches are in sync.
func runSynced(t *testing.T, rt *Runtime) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	controlplane.Eventually(t, 30*time.Second, "caches in sync", func() error {
		if !rt.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
}
