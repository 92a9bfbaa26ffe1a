package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestReadmittedSecretAuthenticatesWithCredentialsOfItsOwn: a served Secret whose
// allowed credential plugin authenticates its cluster is refused while a second Secret
// claims its name (its registration ends and closes its plugin runner), then served
// again once the duplicate goes, and again after an update: each registration runs
// the plugin with a runner of its own, and its requests are authenticated.
func TestReadmittedSecretAuthenticatesWithCredentialsOfItsOwn(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd := namespace(t, a, "readmit-argocd")
	runs := filepath.Join(t.TempDir(), "runs")
	token := pluginScript(t, "token-plugin", `echo run >> `+runs+`
echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"`+b.AdminToken()+`"}}'
`)
	allowed, err := cluster.NewExecPolicy([]string{token}, 0, "")
	require.NoError(t, err)
	opts := hubOptions(a, argocd)
	opts.ExecPlugins = allowed
	s := startBreakServe(t, opts, server.Ingress{})
	secrets := a.Client().CoreV1().Secrets(argocd)
	pluginRuns := func() int {
		b, _ := os.ReadFile(runs)
		return strings.Count(string(b), "run\n")
	}
	servedThroughItsPlugin := func(step string) {
		t.Helper()
		controlplane.Eventually(t, 30*time.Second, "member served through its plugin's token "+step, func() error {
			if !s.srv.Clusters().Healthy("member") {
				st, _ := statusOf(s, argocd+"/member")
				return fmt.Errorf("status %+v", st)
			}
			return nil
		})
		code, body := s.gcDryRun(t, "member", "default")
		assert.Equal(t, http.StatusOK, code, "an authenticated sweep of member %s: %s", step, body)
	}

	createSecret(t, a, execClusterSecret(argocd, "member", "member", b.ServerURL(), token))
	servedThroughItsPlugin("at first")
	first := pluginRuns()

	dup := clusterSecret(b, argocd, "dup", "member")
	createSecret(t, a, dup)
	controlplane.Eventually(t, 30*time.Second, "member refused as a duplicate name", func() error {
		st, _ := statusOf(s, argocd+"/member")
		if st.Reason != cluster.ReasonDuplicateName || slices.Contains(s.srv.Clusters().Names(), "member") {
			return fmt.Errorf("status %+v; clusters %v", st, s.srv.Clusters().Names())
		}
		return nil
	})
	require.NoError(t, secrets.Delete(ctx, "dup", metav1.DeleteOptions{}))
	servedThroughItsPlugin("once the duplicate is gone")
	readmitted := pluginRuns()
	assert.Greater(t, readmitted, first, "the new registration ran the plugin with a runner of its own")

	cur, err := secrets.Get(ctx, "member", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data["namespaces"] = []byte("default")
	_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "the update registered", func() error {
		c, err := s.srv.Clusters().Cluster("member")
		if err != nil || !slices.Equal(c.Spec.Namespaces, []string{"default"}) {
			return errors.New("not yet")
		}
		return nil
	})
	servedThroughItsPlugin("after an update")
}
