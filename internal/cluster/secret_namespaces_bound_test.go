package cluster

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSecretNamespacesAreBounded: a cluster Secret's "namespaces" starts one cache (a
// set of informers and watches on the cluster's apiserver) per namespace, so its length
// is bounded like the clusters are (--max-clusters): a Secret listing thousands of
// namespaces is refused with a clear error (invalid), not served with thousands of
// caches in the one process every cluster shares.
func TestSecretNamespacesAreBounded(t *testing.T) {
	for _, tt := range []struct {
		name    string
		n       int
		refused bool
	}{
		{"ten thousand", 10000, true},
		{"one over the bound", MaxSecretNamespaces + 1, true},
		{"the bound", MaxSecretNamespaces, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nss := make([]string, tt.n)
			for i := range nss {
				nss[i] = fmt.Sprintf("team-%d", i)
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: "argocd",
				Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
				StringData: map[string]string{"name": "wide", "server": "https://h.example", "namespaces": strings.Join(nss, ",")}}
			_, err := specFromSecret(s, nil)
			if !tt.refused {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.Contains(t, err.Error(), `"namespaces": more than`)
		})
	}
}
