package cli_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// status --exit-code is for CI: exit 3 when a live ReplicaSet references config that
// does not exist (the MISSING lines), 0 when nothing is missing, 1 when the status
// cannot be read, 2 with --watch; the report is printed either way.
func TestStatusExitCodeSaysWhenConfigIsMissing(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	broken, healthy := newNamespace(t, cp), newNamespace(t, cp)
	testfix.CreateReplicaSet(t, kc, broken, "web-1", "web-config-gone")
	testfix.CreateReplicaSet(t, kc, healthy, "web-1", "web-config")
	_, err := kc.CoreV1().ConfigMaps(healthy).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kcfg := cp.Kubeconfig()
	missing := "error: MISSING config (status --exit-code): ConfigMap " + broken + "/web-config-gone (used by ReplicaSet/web-1)"
	runTable(t, []dayOneCase{
		{name: "without --exit-code, MISSING is reported and the command succeeds",
			args: []string{"status", "--kubeconfig", kcfg, "-n", broken}, wantCode: 0, wantOut: []string{"web-config-gone", "MISSING"}, emptyErr: true},
		{name: "with --exit-code, MISSING exits 3 with the report and one line naming it",
			args:     []string{"status", "--kubeconfig", kcfg, "-n", broken, "--exit-code"},
			wantCode: cli.ExitMissingConfig, wantOut: []string{"web-config-gone", "MISSING"}, wantErr: []string{missing}, errLines: 1},
		{name: "with --exit-code, nothing missing exits 0",
			args: []string{"status", "--kubeconfig", kcfg, "-n", healthy, "--exit-code"}, wantCode: 0, wantOut: []string{"web-config"}, emptyErr: true},
		{name: "with --exit-code, a status that cannot be read is a failure",
			args:     []string{"status", "--kubeconfig", kcfg, "-n", broken + "x", "--exit-code"},
			wantCode: 1, wantErr: []string{"not found"}, errLines: 1},
		{name: "--exit-code and --watch are exclusive",
			args: []string{"status", "--kubeconfig", kcfg, "-n", broken, "--exit-code", "--watch"}, wantCode: 2, wantErr: []string{"exclusive"}},
	})
	t.Run("-o json keeps stdout a document", func(t *testing.T) {
		code, out, errOut := run(ctx, "status", "--kubeconfig", kcfg, "-n", broken, "--exit-code", "-o", "json")
		assert.Equal(t, cli.ExitMissingConfig, code, errOut)
		var reps []inspect.Report
		require.NoError(t, json.Unmarshal([]byte(out), &reps), out)
		require.Len(t, reps, 1)
		require.NotEmpty(t, reps[0].Workloads)
		assert.Equal(t, "web-config-gone", reps[0].Workloads[0].Dangling[0].Name)
	})
}
