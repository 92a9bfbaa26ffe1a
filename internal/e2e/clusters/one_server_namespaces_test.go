package clusters_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestOneAPIServerSplitByDisjointNamespacesServesEach: two Secrets naming one apiserver
// (as 127.0.0.1 and as localhost) with disjoint "namespaces" are two logical clusters,
// both served, each sweeping its own namespace only; once their namespaces overlap both
// are refused as one server named twice (duplicate-server), loudly: a Warning Event on
// each Secret and the refusal metric.
func TestOneAPIServerSplitByDisjointNamespacesServesEach(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd, teamA, teamB := namespace(t, a, "split-argocd"), namespace(t, b, "split-team-a"), namespace(t, b, "split-team-b")
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{})
	secrets := a.Client().CoreV1().Secrets(argocd)
	for _, team := range []struct{ name, ns, server string }{
		{"team-a", teamA, b.ServerURL()},
		{"team-b", teamB, strings.Replace(b.ServerURL(), "127.0.0.1", "localhost", 1) + "/"},
	} {
		sec := clusterSecret(b, argocd, team.name, team.name)
		sec.StringData["server"], sec.StringData["namespaces"] = team.server, team.ns
		createSecret(t, a, sec)
	}
	controlplane.Eventually(t, 30*time.Second, "both logical clusters served", func() error {
		for _, c := range []string{"team-a", "team-b"} {
			if !s.srv.Clusters().Healthy(c) {
				st, _ := statusOf(s, argocd+"/"+c)
				return fmt.Errorf("%s: %+v", c, st)
			}
		}
		return nil
	})
	code, body := s.gcDryRun(t, "team-a", teamA)
	assert.Equal(t, http.StatusOK, code, body)
	code, body = s.gcDryRun(t, "team-a", teamB)
	assert.Equal(t, http.StatusConflict, code, "team-a sweeps its own namespace only: %s", body)

	cur, err := secrets.Get(ctx, "team-b", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data["namespaces"] = []byte(teamB + "," + teamA)
	_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "overlapping namespaces: both refused", func() error {
		for _, c := range []string{"team-a", "team-b"} {
			st, _ := statusOf(s, argocd+"/"+c)
			if st.Registered || st.Reason != cluster.ReasonDuplicateServer || len(st.Conflicts) != 1 {
				return fmt.Errorf("%s: %+v", c, st)
			}
		}
		return nil
	})
	line := s.metricLine(`configmap_attacher_cluster_secret_refused{cluster="team-a",conflicts="` + argocd + `/team-b"`)
	assert.Contains(t, line, `reason="duplicate-server"`)
	controlplane.Eventually(t, 30*time.Second, "a Warning Event on each Secret", func() error {
		evs, err := a.Client().CoreV1().Events(argocd).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		on := map[string]bool{}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "ClusterSecretRefused" && strings.Contains(e.Message, "overlapping namespaces") {
				on[e.InvolvedObject.Name] = true
			}
		}
		if !on["team-a"] || !on["team-b"] {
			return fmt.Errorf("Warning Events on %v", on)
		}
		return nil
	})
}
