package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestKubeconfigCredentialPluginRunsUnderTheDeadline (rule 13): a kubeconfig context's
// exec plugin is the operator's (no allow-list) but is run by the service's runner,
// not by client-go's, which has no deadline: a hung plugin is killed, with its child,
// after --exec-plugin-timeout while the registry runs, its cluster is marked down, a
// healthy context's plugin (given its cluster's details: provideClusterInfo)
// authenticates its cluster meanwhile, and the registry stops promptly.
func TestKubeconfigCredentialPluginRunsUnderTheDeadline(t *testing.T) {
	requireClusters(t)
	dir := t.TempDir()
	hang := writeScript(t, dir, "hang", hangingPlugin)
	pidFile := filepath.Join(dir, "pids")
	token := writeScript(t, dir, "token", `case "$KUBERNETES_EXEC_INFO" in
*'"server":"`+cpB.ServerURL()+`"'*) ;;
*) echo "no cluster info: $KUBERNETES_EXEC_INFO" >&2; exit 3;;
esac
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"`+cpB.AdminToken()+`"}}'
`)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["b"] = &clientcmdapi.Cluster{Server: cpB.ServerURL(), CertificateAuthorityData: cpB.CAData()}
	kc.AuthInfos["tok"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: token,
		APIVersion: "client.authentication.k8s.io/v1", ProvideClusterInfo: true, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	kc.AuthInfos["hung"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: hang, Args: []string{pidFile},
		APIVersion: "client.authentication.k8s.io/v1beta1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	kc.Contexts["tok"] = &clientcmdapi.Context{Cluster: "b", AuthInfo: "tok"}
	kc.Contexts["hung"] = &clientcmdapi.Context{Cluster: "b", AuthInfo: "hung"}
	path := filepath.Join(dir, "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	specs, err := KubeconfigSpecs(path, []string{"tok", "hung"}, false, 0, 0)
	require.NoError(t, err)
	home := Spec{Name: "hub", Source: SourceHome, Origin: "test", Config: cpA.RESTConfig()}
	reg, err := New(Options{Clusters: append([]Spec{home}, specs...), ExecTimeout: 2 * time.Second, Logger: testLogger(t),
		ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx) }()

	controlplane.Eventually(t, 30*time.Second, "hung marked down by its plugin", func() error {
		if st := statusNamed(reg, "hung"); st.Reachable || !st.Registered || !strings.Contains(st.Error, "credential") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	controlplane.Eventually(t, 30*time.Second, "the hung plugin and its child killed at the deadline", func() error {
		first := pids(t, pidFile)
		if len(first) < 2 {
			return errors.New("not started yet")
		}
		for _, p := range first[:2] {
			if alive(p) {
				return errors.New("pid " + strconv.Itoa(p) + " still runs")
			}
		}
		return nil
	})
	controlplane.Eventually(t, 30*time.Second, "tok authenticated by its plugin meanwhile", func() error {
		if !reg.Healthy("tok") {
			return fmt.Errorf("status %+v", statusNamed(reg, "tok"))
		}
		return nil
	})

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("the registry did not stop while a kubeconfig plugin hangs")
	}
	controlplane.Eventually(t, 10*time.Second, "no plugin outlives the registry", func() error {
		for _, p := range pids(t, pidFile) {
			if alive(p) {
				return errors.New("pid " + strconv.Itoa(p) + " still runs")
			}
		}
		return nil
	})
}

func statusNamed(r *Registry, name string) Status {
	for _, st := range r.Statuses() {
		if st.Name == name {
			return st
		}
	}
	return Status{}
}

// TestKubeconfigExecPluginTakenOverFromClientGo: a Spec of a kubeconfig context with an
// exec plugin keeps client-go's runner for the one-shot commands; each registration
// replaces it with a runner of its own, bounded by the registry's timeout.
func TestKubeconfigExecPluginTakenOverFromClientGo(t *testing.T) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://c.example:6443"}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/opt/bin/get-token", Args: []string{"x"},
		Env: []clientcmdapi.ExecEnvVar{{Name: "A", Value: "1"}}, APIVersion: "client.authentication.k8s.io/v1beta1",
		ProvideClusterInfo: true, InteractiveMode: clientcmdapi.IfAvailableExecInteractiveMode}}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	specs, err := KubeconfigSpecs(path, []string{"c"}, false, 0, 0)
	require.NoError(t, err)
	require.NotNil(t, specs[0].Config.ExecProvider)

	one, err := specs[0].withCredentials(3 * time.Second)
	require.NoError(t, err)
	two, err := specs[0].withCredentials(3 * time.Second)
	require.NoError(t, err)
	for _, sp := range []Spec{one, two} {
		require.NotNil(t, sp.creds)
		assert.Nil(t, sp.Config.ExecProvider, "client-go no longer runs the plugin")
		assert.Equal(t, "/opt/bin/get-token", sp.creds.path)
		assert.Equal(t, []string{"x"}, sp.creds.args)
		assert.Equal(t, []string{"A=1"}, sp.creds.env)
		assert.Equal(t, 3*time.Second, sp.creds.timeout)
		assert.Contains(t, string(sp.creds.cluster), `"server":"https://c.example:6443"`)
	}
	assert.NotSame(t, one.creds, two.creds, "a runner per registration")
	one.closeCredentials()
	assert.NoError(t, two.creds.life.Err(), "closing one registration leaves the other's runner alive")
}

// TestKubeconfigTokenBesideAnExecPluginIsSentWithoutARun: as with client-go, a
// kubeconfig user's static credentials win over its exec plugin, which is not run.
func TestKubeconfigTokenBesideAnExecPluginIsSentWithoutARun(t *testing.T) {
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer ts.Close()
	cfg := &rest.Config{Host: ts.URL, BearerToken: "static",
		ExecProvider: &clientcmdapi.ExecConfig{Command: "/nonexistent/plugin", APIVersion: "client.authentication.k8s.io/v1"}}
	sp, err := Spec{Name: "c", Config: cfg}.withCredentials(time.Second)
	require.NoError(t, err)
	defer sp.closeCredentials()
	rc, err := rest.HTTPClientFor(sp.Config)
	require.NoError(t, err)
	resp, err := rc.Get(ts.URL)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, []string{"Bearer static"}, seen)
	assert.Zero(t, sp.creds.Runs(), "the plugin did not run")
}
