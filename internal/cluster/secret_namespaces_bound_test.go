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
	t.Skip("finding: a Secret's namespaces are not bounded: 10000 distinct namespaces are accepted and each starts a cache (informers and watches) on the cluster; the bound is a design decision (--max-clusters is 50 by default)")
	nss := make([]string, 10000)
	for i := range nss {
		nss[i] = fmt.Sprintf("team-%d", i)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "wide", Namespace: "argocd",
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "wide", "server": "https://h.example", "namespaces": strings.Join(nss, ",")}}
	_, err := specFromSecret(s, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"namespaces"`)
}
