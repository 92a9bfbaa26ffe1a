package clusters_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestSecretNamespacesWrittenSeveralTimesAreCachedOnce: a Secret's "namespaces" naming
// one namespace several times (with spaces and empty entries between) is that one
// namespace: one cache and one sweep of it, not one per entry (a Secret of up to 1 MiB
// of "a,a,a,..." would otherwise start hundreds of thousands of caches on one cluster).
func TestSecretNamespacesWrittenSeveralTimesAreCachedOnce(t *testing.T) {
	a, b := planes()
	if a == nil {
		t.Skip("integration test: needs two local control planes (not started with -short)")
	}
	ctx := context.Background()
	breakRun.Add(1)
	argocd, team := uniq("dupns-argocd"), uniq("dupns-team")
	createNamespace(t, a, argocd)
	createNamespace(t, b, team)
	s := startBreakServe(t, cluster.Options{
		Clusters:        []cluster.Spec{{Name: "hub", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()}},
		ArgoCDNamespace: argocd,
	}, server.Ingress{})
	sec := b.ArgoCDClusterSecret("team", "team")
	sec.Namespace = argocd
	sec.StringData["namespaces"] = strings.Join([]string{team, " " + team, "", team + " ", team}, ",")
	_, err := a.Client().CoreV1().Secrets(argocd).Create(ctx, sec, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "served with its one namespace", func() error {
		st, _ := statusOf(s, argocd+"/team")
		if !st.Registered || !slices.Equal(st.Namespaces, []string{team}) {
			return fmt.Errorf("registered=%v namespaces=%q reason=%q", st.Registered, st.Namespaces, st.Reason)
		}
		return nil
	})
}
