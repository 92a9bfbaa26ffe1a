package cluster

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Exported for the external tests (package cluster_test), which drive the CLI.

// ForTestPlanes returns the two control planes (nil with -short).
func ForTestPlanes() (a, b *controlplane.ControlPlane) { return cpA, cpB }

// ForTestKubeconfig writes a kubeconfig with contexts "a" and "b".
func ForTestKubeconfig(t *testing.T) string { return mergedKubeconfig(t) }

// ForTestFixture creates an opted-in ConfigMap and a ReplicaSet using it and returns
// the ReplicaSet and a function reading the ConfigMap's owner UIDs.
func ForTestFixture(t *testing.T, cp *controlplane.ControlPlane, ns, rs, cm string) (*appsv1.ReplicaSet, func(*testing.T) []string) {
	f := makeFixture(t, cp, ns, rs, cm)
	return f.rs, f.owners
}

// ForTestArgoCDSecret returns an Argo CD cluster Secret (namespace argocd) for cp named clusterName.
func ForTestArgoCDSecret(name, clusterName string, cp *controlplane.ControlPlane) *corev1.Secret {
	return argoCDSecret(name, clusterName, cp)
}
