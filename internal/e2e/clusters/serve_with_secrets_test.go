package clusters_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// The set-up the tests share that serve with Argo CD cluster Secrets: control plane a is
// the hub (the server's home cluster, holding the Secrets in a namespace of the test's
// own), b the member the Secrets point at.

// needPlanes returns the two control planes, or skips t without them (-short).
func needPlanes(t *testing.T) (a, b *controlplane.ControlPlane) {
	t.Helper()
	a, b = planes()
	if a == nil {
		t.Skip("integration test: needs two local control planes (not started with -short)")
	}
	return a, b
}

// newRun is needPlanes for a test that names its objects with uniq: it starts a new run.
func newRun(t *testing.T) (a, b *controlplane.ControlPlane) {
	t.Helper()
	a, b = needPlanes(t)
	breakRun.Add(1)
	return a, b
}

// namespace creates namespace uniq(name) in cp and returns its name.
func namespace(t *testing.T, cp *controlplane.ControlPlane, name string) string {
	t.Helper()
	ns := uniq(name)
	createNamespace(t, cp, ns)
	return ns
}

// hubOptions are the cluster options of a server whose home cluster is a (named "hub")
// and which reads the Argo CD cluster Secrets of namespace argocd of a.
func hubOptions(a *controlplane.ControlPlane, argocd string) cluster.Options {
	return cluster.Options{Clusters: []cluster.Spec{{Name: "hub", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()}},
		ArgoCDNamespace: argocd}
}

// clusterSecret is the Argo CD cluster Secret name of cp as cluster clusterName, in
// namespace argocd (not created).
func clusterSecret(cp *controlplane.ControlPlane, argocd, name, clusterName string) *corev1.Secret {
	sec := cp.ArgoCDClusterSecret(name, clusterName)
	sec.Namespace = argocd
	return sec
}

// createSecret creates sec in hub and returns it as created.
func createSecret(t *testing.T, hub *controlplane.ControlPlane, sec *corev1.Secret) *corev1.Secret {
	t.Helper()
	got, err := hub.Client().CoreV1().Secrets(sec.Namespace).Create(context.Background(), sec, metav1.CreateOptions{})
	require.NoError(t, err)
	return got
}
