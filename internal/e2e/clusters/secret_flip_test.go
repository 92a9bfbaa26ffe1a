package clusters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestSecretFlippingBetweenAllowedAndRefusedLeavesNothingRunning: a cluster Secret
// updated back and forth, without pause, between an allowed credential plugin (one that
// hangs, with a child) and a command not allowed ends refused with no plugin process
// and no goroutine of its registrations left: each registration's runner is killed
// with its process group when the Secret changes, however fast it changes.
func TestSecretFlippingBetweenAllowedAndRefusedLeavesNothingRunning(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd := namespace(t, a, "flip-argocd")
	plugin := pluginScript(t, "hang", hangingPlugin)
	pidFile := filepath.Join(t.TempDir(), "pids")
	allowed, err := cluster.NewExecPolicy([]string{plugin}, 10*time.Minute, "")
	require.NoError(t, err)
	opts := hubOptions(a, argocd)
	opts.ExecPlugins, opts.ProbeInterval, opts.ProbeTimeout = allowed, 100*time.Millisecond, time.Second
	s := startBreakServe(t, opts, server.Ingress{})
	s.warmUsers(t, a, "hub")
	keepGoroutinesOnFailure(t)
	base := settledGoroutines()
	server := "https://" + testfix.NewCutProxy(t, strings.TrimPrefix(b.ServerURL(), "https://")).Addr()
	secrets := a.Client().CoreV1().Secrets(argocd)
	sec := createSecret(t, a, execClusterSecret(argocd, "flip", "flip", server, plugin, pidFile))
	controlplane.Eventually(t, 30*time.Second, "the plugin runs", func() error {
		if len(readPids(t, pidFile)) < 2 {
			return fmt.Errorf("pids %v", readPids(t, pidFile))
		}
		return nil
	})
	for i := range 21 { // the last one (20) is refused
		command := "/bin/false" // not allowed
		if i%2 == 1 {
			command = plugin
		}
		cfg, err := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"insecure": true},
			"execProviderConfig": map[string]any{"command": command, "args": []string{pidFile, fmt.Sprint(i)}, "apiVersion": "client.authentication.k8s.io/v1beta1"}})
		require.NoError(t, err)
		sec.Data["config"] = cfg
		sec, err = secrets.Update(ctx, sec, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	controlplane.Eventually(t, 60*time.Second, "refused, no plugin process and no registration's goroutine left", func() error {
		if st, _ := statusOf(s, argocd+"/flip"); st.Registered || st.Reason != cluster.ReasonExecNotAllowed {
			return fmt.Errorf("status %+v", st)
		}
		for _, p := range readPids(t, pidFile) {
			if processRuns(p) {
				return fmt.Errorf("pid %d still runs (of %d started)", p, len(readPids(t, pidFile)))
			}
		}
		if n := settledGoroutines(); n > base+10 {
			return fmt.Errorf("%d goroutines, %d before the Secret", n, base)
		}
		return nil
	})
	t.Logf("%d plugin processes started over the flips, none left", len(readPids(t, pidFile)))
}
