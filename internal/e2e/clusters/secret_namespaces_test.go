package clusters_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestSecretNamespacesWrittenSeveralTimesAreCachedOnce: a Secret's "namespaces" naming
// one namespace several times (with spaces and empty entries between) is that one
// namespace: one cache and one sweep of it, not one per entry (a Secret of up to 1 MiB
// of "a,a,a,..." would otherwise start hundreds of thousands of caches on one cluster).
func TestSecretNamespacesWrittenSeveralTimesAreCachedOnce(t *testing.T) {
	a, b := newRun(t)
	argocd, team := namespace(t, a, "dupns-argocd"), namespace(t, b, "dupns-team")
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{})
	sec := clusterSecret(b, argocd, "team", "team")
	sec.StringData["namespaces"] = strings.Join([]string{team, " " + team, "", team + " ", team}, ",")
	createSecret(t, a, sec)
	controlplane.Eventually(t, 30*time.Second, "served with its one namespace", func() error {
		st, _ := statusOf(s, argocd+"/team")
		if !st.Registered || !slices.Equal(st.Namespaces, []string{team}) {
			return fmt.Errorf("registered=%v namespaces=%q reason=%q", st.Registered, st.Namespaces, st.Reason)
		}
		return nil
	})
}
