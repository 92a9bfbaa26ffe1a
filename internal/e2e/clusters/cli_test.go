package clusters_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(context.Background(), args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// orphan creates an opted-in ConfigMap that nothing uses or owns.
func orphan(t *testing.T, cp *controlplane.ControlPlane, ns, name string) {
	t.Helper()
	_, err := cp.Client().CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func exists(t *testing.T, cp *controlplane.ControlPlane, ns, name string) bool {
	t.Helper()
	_, err := cp.Client().CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestCLIAcrossClusters(t *testing.T) {
	a, b := needPlanes(t)
	kc := controlplane.MergedKubeconfig(t, cpA, cpB)
	const ns = "cli-multi"
	rsA, ownersA := testfix.ListedFixture(t, a, ns, "web", "cfg-web")
	rsB, ownersB := testfix.ListedFixture(t, b, ns, "web", "cfg-web")
	orphan(t, a, ns, "old-1")
	orphan(t, b, ns, "old-1")

	t.Run("attach --cluster b changes only b", func(t *testing.T) {
		code, out, errs := run(t, "attach", "--kubeconfig", kc, "--cluster", "b", "--replicaset", "web", "-n", ns, "-o", "json", "--timeout", "30s")
		require.Equal(t, 0, code, errs)
		var res cli.AttachOutput
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		assert.Equal(t, "b", res.Cluster)
		assert.Equal(t, rsB.UID, res.UID)
		assert.Equal(t, []string{string(rsB.UID)}, ownersB(t))
		assert.Nil(t, ownersA(t))
		_ = rsA
	})

	t.Run("attach --cluster names an unknown context: usage error", func(t *testing.T) {
		code, _, errs := run(t, "attach", "--kubeconfig", kc, "--cluster", "c", "--replicaset", "web", "-n", ns)
		assert.Equal(t, 2, code)
		assert.Contains(t, errs, `"c" not found`)
	})

	t.Run("gc dry run over every context carries the cluster name", func(t *testing.T) {
		code, out, errs := run(t, "gc", "--kubeconfig", kc, "--all-contexts", "-n", ns, "--gc-min-age=0s", "--gc-keep=0", "-o", "json")
		require.Equal(t, 0, code, errs)
		var res cli.GCOutput
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		clusters := map[string][]string{}
		for _, r := range res.Namespaces {
			for _, it := range r.Results {
				clusters[r.Cluster] = append(clusters[r.Cluster], it.Name+"="+string(it.Outcome))
			}
		}
		assert.Contains(t, clusters["a"], "old-1=would-delete")
		assert.Contains(t, clusters["b"], "old-1=would-delete")

		code, out, errs = run(t, "gc", "--kubeconfig", kc, "--all-contexts", "-n", ns, "--gc-min-age=0s", "--gc-keep=0")
		require.Equal(t, 0, code, errs)
		assert.True(t, strings.HasPrefix(out, "CLUSTER"), out)
		assert.Regexp(t, `(?m)^a\s+`+ns+`\s+ConfigMap\s+old-1`, out)
		assert.Regexp(t, `(?m)^b\s+`+ns+`\s+ConfigMap\s+old-1`, out)
	})

	t.Run("gc --cluster b deletes only in b", func(t *testing.T) {
		code, out, errs := run(t, "gc", "--kubeconfig", kc, "--cluster", "b", "-n", ns, "--gc-min-age=0s", "--gc-keep=0", "--dry-run=none")
		require.Equal(t, 0, code, errs+out)
		assert.False(t, exists(t, b, ns, "old-1"))
		assert.True(t, exists(t, a, ns, "old-1"), "a is not touched")
		assert.True(t, exists(t, b, ns, "cfg-web"), "b's used revision is kept")
	})

	t.Run("status with b down shows a and says b is down", func(t *testing.T) {
		require.NoError(t, b.StopAPIServer())
		defer func() { require.NoError(t, b.RestartAPIServer(context.Background())) }()
		start := time.Now()
		code, out, errs := run(t, "status", "--kubeconfig", kc, "--all-contexts", "-n", ns)
		assert.Equal(t, 1, code)
		assert.Contains(t, out, "Cluster: a\nNamespace: "+ns)
		assert.Contains(t, out, "old-1")
		assert.Contains(t, errs, "cluster b:")
		assert.Less(t, time.Since(start), 30*time.Second)

		code, out, _ = run(t, "status", "--kubeconfig", kc, "--cluster", "a", "-n", ns, "-o", "json")
		assert.Equal(t, 0, code)
		var reps []inspect.Report
		require.NoError(t, json.Unmarshal([]byte(out), &reps))
		require.Len(t, reps, 1)
		assert.Equal(t, "a", reps[0].Cluster)
	})
}

func TestServeSeveralClusters(t *testing.T) {
	a, b := needPlanes(t)
	kc := controlplane.MergedKubeconfig(t, cpA, cpB)
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errb bytes.Buffer
	tokenFile := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("detail-token\n"), 0o600))
	go func() {
		done <- cli.Main(ctx, []string{"serve", "--kubeconfig", kc, "--cluster", "a", "--cluster", "b", "--grpc-addr", "-",
			"--http-addr", addr, "--metrics-addr", "127.0.0.1:0", "--cluster-probe-interval", "200ms", "--log-level", "warn",
			"--http-token-file", tokenFile, "--http-public-metrics"},
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, errb.String())
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	readyz := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/readyz", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	controlplane.Eventually(t, 30*time.Second, "/readyz", func() error {
		if code, body := readyz("detail-token"); code != 200 || !strings.Contains(body, "b ok") {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	code, body := readyz("detail-token")
	assert.Equal(t, 200, code)
	assert.Equal(t, "ok\na (default) ok\nb ok\n", body, "the detail behind the token")
	for _, tok := range []string{"", "wrong"} {
		code, body = readyz(tok)
		assert.Equal(t, 200, code)
		assert.Equal(t, "ok\n", body, "without the token (%q) /readyz says only ready or not", tok)
	}

	rsB, ownersB := testfix.ListedFixture(t, b, "serve-multi", "web", "cfg-web")
	_, ownersA := testfix.ListedFixture(t, a, "serve-multi", "web", "cfg-web")
	payload, err := json.Marshal(map[string]any{"type": "ADD", "group": "apps", "version": "v1", "resource": "replicasets",
		"metadata": map[string]string{"cluster": "b"}, "body": rsB})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/", bytes.NewReader(payload))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer detail-token")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	rb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, string(rb))
	assert.Equal(t, []string{string(rsB.UID)}, ownersB(t))
	// Cluster a's own revision side may attach a's cfg-web to a's ReplicaSet (it is listed
	// and used there); what must not happen is b's event writing to a.
	assert.NotContains(t, ownersA(t), string(rsB.UID), "the event for cluster b wrote nothing to a")

	resp, err = http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(mb), `configmap_attacher_cluster_up{cluster="b",source="kubeconfig"} 1`)
}
