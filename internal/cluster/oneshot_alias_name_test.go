package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestOneShotArgoCDSpecsRefuseASecretTakingAHomeAliasName: a one-shot command
// (argoCDSpecs, under Sources.All) decides as serve does: a Secret claiming the name of
// Argo CD's in-cluster Secret (an alias of the home cluster, skipped) for another
// server is refused (duplicate name), whatever the order of the Secrets, instead of
// taking that name over.
func TestOneShotArgoCDSpecsRefuseASecretTakingAHomeAliasName(t *testing.T) {
	secret := func(name, cluster, server string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: name,
			Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
			Data: map[string][]byte{"name": []byte(cluster), "server": []byte(server), "config": []byte(`{"bearerToken":"t"}`)}}
	}
	home := homeClusterOf([]Spec{staticSpec("hub", SourceHome, homeServer)})
	for _, tc := range []struct{ name, alias, other string }{
		{"alias sorts first", "a-in-cluster", "b-shadow"},
		{"shadow sorts first", "b-in-cluster", "a-shadow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(
				secret(tc.alias, ArgoCDInClusterName, ArgoCDInClusterServer),
				secret(tc.other, ArgoCDInClusterName, "https://elsewhere.example:6443"),
				secret("c-prod", "prod", "https://prod.example:6443"))
			specs, bad, err := argoCDSpecs(context.Background(), client, "argocd", nil, home)
			require.NoError(t, err)
			var names []string
			for _, sp := range specs {
				names = append(names, sp.Name)
			}
			assert.Equal(t, []string{"prod"}, names, "no Secret takes the name of the home's alias")
			require.Len(t, bad, 1)
			assert.ErrorContains(t, bad[0], tc.other)
			assert.ErrorContains(t, bad[0], tc.alias)
		})
	}
}
