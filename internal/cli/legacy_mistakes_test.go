package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// The legacy Job form when the Rollout exists but has no status (the Rollout
// controller is not running, or has not seen it): a bounded wait, then exit 1 with a
// reason naming what is missing; nothing is written.
func TestLegacyRolloutWithoutStatusWaitsBounded(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	ns := newNamespace(t, cp)
	t.Setenv("KUBECONFIG", cp.Kubeconfig())
	t.Setenv("IS_IN_CLUSTER", "false")
	dc := dynamic.NewForConfigOrDie(cp.RESTConfig())
	_, err := dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": map[string]any{"name": "app"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "app"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "app"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app:2"}}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	code, out, errOut := run(ctx, "-rollout", "app", "-namespace", ns, "-configmaps", "app-a", "-timeout", "2s")
	assert.Less(t, time.Since(start), 15*time.Second)
	assert.Equal(t, 1, code, "stdout %s\nstderr %s", out, errOut)
	assert.Contains(t, errOut, "observedGeneration", "the reason names what is missing")
}

// Rule 8 on the legacy path: a namespace that can never exist must be a usage error
// (exit 2) at once, not a wait for the whole -timeout that ends in "not found".
func TestLegacyBadNamespaceIsAUsageError(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	t.Setenv("KUBECONFIG", cp.Kubeconfig())
	t.Setenv("IS_IN_CLUSTER", "false")
	for _, ns := range []string{"Prod", "a/b", "ns_1", "-bad", "über"} {
		t.Run(ns, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := run(context.Background(), "-rollout", "app", "-namespace", ns, "-configmaps", "app-a", "-timeout", "3s")
			assert.Equal(t, 2, code, "a usage error; stdout %s\nstderr %s", out, errOut)
			assert.Less(t, time.Since(start), time.Second, "no wait for the timeout")
		})
	}
}

// Rule 4 on the legacy path: names that are not same-namespace object names are
// usage errors and nothing is contacted.
func TestLegacyBadConfigMapNamesAreUsageErrors(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	t.Setenv("KUBECONFIG", cp.Kubeconfig())
	t.Setenv("IS_IN_CLUSTER", "false")
	for i, list := range []string{"kube-system/coredns", "Upper", "a,,b/c", "ünï", "..", " , "} {
		t.Run(string(rune('a'+i)), func(t *testing.T) {
			start := time.Now()
			code, out, errOut := run(context.Background(), "-rollout", "app", "-namespace", "default", "-configmaps", list, "-timeout", "3s")
			assert.Equal(t, 2, code, "list %q; stdout %s\nstderr %s", list, out, errOut)
			assert.Less(t, time.Since(start), time.Second)
		})
	}
}

// The old Job's form is answered in its own spelling: its errors name -configmaps and
// -timeout as its users typed them, where attach's name --configmaps and --timeout.
func TestLegacyErrorsSpellFlagsWithOneDash(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"old form, bad list", []string{"-rollout", "app", "-namespace", "default", "-configmaps", "a/b"}, "error: -configmaps: "},
		{"old form, zero timeout", []string{"-rollout", "app", "-namespace", "default", "-configmaps", "a", "-timeout", "0s"}, "error: -timeout must be positive"},
		{"attach, bad list", []string{"attach", "--rollout", "app", "-n", "default", "--configmaps", "a/b"}, "error: --configmaps: "},
		{"attach, zero timeout", []string{"attach", "--rollout", "app", "-n", "default", "--configmaps", "a", "--timeout", "0s"}, "error: --timeout must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(context.Background(), tc.args...)
			assert.Equal(t, 2, code, "stdout %s\nstderr %s", out, errOut)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

// The old Job's form has no dry run; asked for one it says where it is (the attach
// command's --dry-run), on one line and as a usage error, and changes nothing.
func TestLegacyDryRunPointsToAttach(t *testing.T) {
	const hint = "the old Job's form has no --dry-run: use configmap-attacher attach --rollout R -n N --configmaps a,b --dry-run=server"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"two dashes with a value", []string{"-rollout", "app", "-namespace", "default", "-configmaps", "a", "--dry-run=server"}},
		{"one dash with a value", []string{"-rollout", "app", "-namespace", "default", "-configmaps", "a", "-dry-run=client"}},
		{"without a value", []string{"-rollout", "app", "-namespace", "default", "-configmaps", "a", "--dry-run"}},
		{"first", []string{"-dry-run", "-rollout", "app", "-namespace", "default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(context.Background(), tc.args...)
			assert.Equal(t, 2, code, "stdout %s\nstderr %s", out, errOut)
			assert.Contains(t, errOut, "flag provided but not defined: -dry-run")
			assert.Contains(t, errOut, hint)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
		})
	}
}
