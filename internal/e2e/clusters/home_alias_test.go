package clusters_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestArgoCDInClusterSecretIsAnAliasOfTheHub: the hub's own Argo CD `in-cluster` Secret
// (server https://kubernetes.default.svc, no credentials, a "namespaces" of its own)
// beside a member's is not refused (no status, no refused metric), and an event naming
// in-cluster is handled in the hub, in a namespace outside the Secret's "namespaces".
func TestArgoCDInClusterSecretIsAnAliasOfTheHub(t *testing.T) {
	a, b := newRun(t)
	argocd, only := namespace(t, a, "alias-argocd"), namespace(t, a, "alias-only")
	createSecret(t, a, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-cluster", Namespace: argocd,
		Labels: map[string]string{cluster.ArgoCDSecretTypeLabel: cluster.ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "in-cluster", "server": cluster.ArgoCDInClusterServer, "namespaces": only}})
	createSecret(t, a, clusterSecret(b, argocd, "member-b", "member-b"))
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{})
	controlplane.Eventually(t, 30*time.Second, "member-b served", func() error {
		if !s.srv.Clusters().Healthy("member-b") {
			return errors.New("not yet")
		}
		return nil
	})
	_, found := statusOf(s, argocd+"/in-cluster")
	assert.False(t, found, "the in-cluster Secret is no refused Secret")
	assert.Empty(t, s.metricLine("configmap_attacher_cluster_secret_refused{"))
	assert.Equal(t, []string{"hub", "member-b"}, s.srv.Clusters().Names())

	home := namespace(t, a, "alias-home")
	rs, owners := testfix.ListedFixture(t, a, home, "web", "cfg-web")
	code, body := s.postEvent(t, "in-cluster", rs)
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"cluster":"hub"`)
	assert.Equal(t, []string{string(rs.UID)}, owners(t), "attached in the hub, outside the Secret's namespaces")
}
