package devcli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/devcli"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// `make run` (configmap-attacher dev) starts the embedded default, prints the kubeconfig,
// the endpoints and an example, becomes ready, and stops cleanly on Ctrl-C.
func TestDevRunsTheEmbeddedDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded default")
	}
	var out, errOut testfix.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", "--log-level", "warn"},
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, devcli.Commands()...)
	}()
	controlplane.Eventually(t, 2*time.Minute, "dev to print its endpoints", func() error {
		select {
		case code := <-done:
			t.Fatalf("dev exited with %d: %s", code, errOut.String())
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C stops everything") {
			return fmt.Errorf("output so far: %q", out.String())
		}
		return nil
	})
	text := out.String()
	for _, want := range []string{"kubeconfig", "gRPC trigger", "HTTP", "EventBus", "export KUBECONFIG=", "demo --kubeconfig",
		"kubectl-argo-rollouts -n try-1 promote web", "-rollout app -namespace try-2 -configmaps app-config-1",
		"way in       the built-in watcher", " status -n try-1", " gc -n try-1", " attach --rollout web -n try-1 --dry-run",
		"curl -s -X POST http://", "does not build"} {
		assert.Contains(t, text, want)
	}
	kubeconfig := regexp.MustCompile(`kubeconfig\s+(\S+)`).FindStringSubmatch(text)[1]
	httpAddr := regexp.MustCompile(`HTTP\s+(http://\S+)`).FindStringSubmatch(text)[1]
	opsAddr := regexp.MustCompile(`ops\s+(http://\S+)`).FindStringSubmatch(text)[1]
	_, err := os.Stat(kubeconfig)
	require.NoError(t, err)
	controlplane.Eventually(t, time.Minute, "/readyz to answer 200", func() error {
		resp, err := http.Get(opsAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})

	t.Run("the old Job's form attaches to the ReplicaSet the real Rollouts controller makes", func(t *testing.T) {
		oldJobForm(t, kubeconfig, regexp.MustCompile(`apply -f (\S+)`).FindStringSubmatch(text)[1])
	})
	t.Run("the Try it block's status, gc, attach and curl", func(t *testing.T) {
		tryItCommands(t, kubeconfig, httpAddr)
	})
	t.Run("the Try it block's scrape is on the ops listener", func(t *testing.T) {
		assert.Contains(t, text, "curl -s "+opsAddr+"/metrics")
		resp, err := http.Get(opsAddr + "/metrics")
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Contains(t, string(body), "configmap_attacher_events_total")
	})

	cancel() // Ctrl-C
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop within 60s of Ctrl-C")
	}
	_, err = os.Stat(kubeconfig)
	assert.True(t, os.IsNotExist(err), "temporary files are removed on stop")
}

// oldJobForm plays the "Try it" block's second part on the embedded default: a ConfigMap
// without the opt-in label, the example Rollout applied, and the old Job's exact command
// line, which waits for the Rollouts controller's ReplicaSet and attaches to it.
func oldJobForm(t *testing.T, kubeconfig, example string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	kc := kubernetes.NewForConfigOrDie(cfg)
	dc := dynamic.NewForConfigOrDie(cfg)
	ctx := context.Background()
	const ns = "try-2"
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, time.Minute, "the default ServiceAccount", func() error {
		_, err := kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config-1"},
		Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	data, err := os.ReadFile(example)
	require.NoError(t, err)
	ro := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal(data, &ro.Object))
	_, err = dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, ro, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Setenv("KUBECONFIG", kubeconfig)
	t.Setenv("IS_IN_CLUSTER", "false")
	var out, errOut testfix.SyncBuffer
	code := cli.Main(ctx, []string{"-rollout", "app", "-namespace", ns, "-configmaps", "app-config-1"},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, devcli.Commands()...)
	require.Equal(t, 0, code, "stderr: %s", errOut.String())
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "app-config-1", metav1.GetOptions{})
	require.NoError(t, err)
	rss, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, rss.Items, 1, "the controller's one ReplicaSet")
	require.Len(t, cm.OwnerReferences, 1)
	assert.Equal(t, rss.Items[0].UID, cm.OwnerReferences[0].UID, "owned by the controller's ReplicaSet: %s", out.String())
}

// tryItCommands runs the "Try it" block's status, gc, attach and curl on try-2 (the
// old Job's form has attached app-config-1 there): each exits 0 and says what it did.
func tryItCommands(t *testing.T, kubeconfig, httpAddr string) {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	require.NoError(t, err)
	rss, err := kubernetes.NewForConfigOrDie(cfg).AppsV1().ReplicaSets("try-2").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, rss.Items)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"status", []string{"status", "--kubeconfig", kubeconfig, "-n", "try-2"}, "ConfigMap app-config-1  owned, by name"},
		{"gc", []string{"gc", "--kubeconfig", kubeconfig, "-n", "try-2"}, "not swept: try-2/ConfigMap/app-config-1"},
		{"attach --dry-run", []string{"attach", "--kubeconfig", kubeconfig, "--rollout", "app", "-n", "try-2", "--dry-run"}, "(dry run: client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut testfix.SyncBuffer
			code := cli.Main(ctx, tc.args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, devcli.Commands()...)
			assert.Equal(t, 0, code, "stderr: %s", errOut.String())
			assert.Contains(t, out.String(), tc.want)
			assert.Empty(t, errOut.String())
		})
	}
	t.Run("curl POST", func(t *testing.T) {
		body := `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":"try-2","name":"` + rss.Items[0].Name + `"}}`
		resp, err := http.Post(httpAddr+"/", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	})
}
