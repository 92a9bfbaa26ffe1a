package cli_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
)

// serve excludes the system namespaces and its own by default, but a namespaced install
// (--watch-namespace, or --namespaces) serves its own namespace: it asked for it.
func TestServeDefaultNamespaceExclusions(t *testing.T) {
	for _, tc := range []struct {
		name, pod, watch string
		allow, deny      []string
		excludeSet       bool
		refused, allowed []string
	}{
		{name: "cluster-wide install excludes the system namespaces and its own", pod: "cma",
			refused: []string{"kube-system", "kube-public", "kube-node-lease", "cma"}, allowed: []string{"shop", "default"}},
		{name: "outside a pod only the system namespaces", refused: []string{"kube-system"}, allowed: []string{"shop", "cma"}},
		{name: "a namespaced install serves its own namespace", pod: "shop", watch: "shop",
			refused: []string{"kube-system"}, allowed: []string{"shop"}},
		{name: "its own namespace listed in --namespaces is served", pod: "shop", allow: []string{"shop"}, allowed: []string{"shop"}},
		{name: "--exclude-namespaces= acts everywhere", pod: "cma", excludeSet: true, allowed: []string{"kube-system", "cma"}},
		{name: "--exclude-namespaces replaces the default", pod: "cma", deny: []string{"shop"}, excludeSet: true,
			refused: []string{"shop"}, allowed: []string{"kube-system", "cma"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("POD_NAMESPACE", tc.pod)
			o := cli.DefaultServeOptions()
			o.Cluster.Namespace = tc.watch
			o.Security.Namespaces, o.Security.ExcludeNamespaces, o.Security.ExcludeSet = tc.allow, tc.deny, tc.excludeSet
			so := o.ServerOptions()
			require.NoError(t, o.Security.Apply(&so))
			for _, ns := range tc.refused {
				assert.Error(t, so.Namespaces.Check(ns), "%s refused", ns)
			}
			for _, ns := range tc.allowed {
				if len(tc.allow) == 0 || ns == "shop" {
					assert.NoError(t, so.Namespaces.Check(ns), "%s allowed", ns)
				}
			}
		})
	}
}
