package controlplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestMainTwo starts two control planes at once, named "a" and "b" (without CRDs), for
// a package whose tests serve several clusters, runs the tests and stops both. With
// -short it starts nothing and leaves *a and *b nil.
func TestMainTwo(m *testing.M, a, b **ControlPlane) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	logf := VerboseLogf
	var wg sync.WaitGroup
	var errA, errB error
	wg.Add(2)
	go func() {
		defer wg.Done()
		*a, errA = Start(context.Background(), Options{Name: "a", Logf: logf, SkipCRDs: true})
	}()
	go func() {
		defer wg.Done()
		*b, errB = Start(context.Background(), Options{Name: "b", Logf: logf, SkipCRDs: true})
	}()
	wg.Wait()
	defer func() {
		for _, cp := range []*ControlPlane{*a, *b} {
			if cp != nil {
				_ = cp.Stop()
			}
		}
	}()
	if err := errors.Join(errA, errB); err != nil {
		if errors.Is(err, ErrMissingBinaries) {
			fmt.Fprintln(os.Stderr, "FAIL: the local control plane's binaries are missing: run `make tools` (make test does it for you)")
		}
		fmt.Fprintln(os.Stderr, "FAIL: starting the local control planes:", err)
		return 1
	}
	return m.Run()
}

// MergedKubeconfig writes one kubeconfig with a context per control plane, named after
// it, each with its own user, as an operator's kubeconfig for several clusters looks;
// the first is the current context.
func MergedKubeconfig(t testing.TB, cps ...*ControlPlane) string {
	cfg := clientcmdapi.NewConfig()
	for _, cp := range cps {
		n := cp.Name()
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: cp.ServerURL(), CertificateAuthorityData: cp.CAData()}
		cfg.AuthInfos[n+"-admin"] = &clientcmdapi.AuthInfo{Token: cp.AdminToken()}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n + "-admin", Namespace: "default"}
	}
	cfg.CurrentContext = cps[0].Name()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// ArgoCDClusterSecret is how Argo CD stores cp as a cluster named clusterName, in
// namespace argocd: bearer token and CA data.
func (c *ControlPlane) ArgoCDClusterSecret(name, clusterName string) *corev1.Secret {
	cfg, _ := json.Marshal(map[string]any{
		"bearerToken":     c.AdminToken(),
		"tlsClientConfig": map[string]any{"insecure": false, "caData": base64.StdEncoding.EncodeToString(c.CAData())},
	})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "argocd",
		Labels: map[string]string{"argocd.argoproj.io/secret-type": "cluster"}},
		StringData: map[string]string{"name": clusterName, "server": c.ServerURL(), "config": string(cfg)}}
}
