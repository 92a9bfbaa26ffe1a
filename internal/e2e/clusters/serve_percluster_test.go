package clusters_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// serveCLI runs `configmap-attacher serve args...` in-process until the test ends and
// waits for /readyz; it returns the HTTP address.
func serveCLI(t *testing.T, args ...string) string {
	t.Helper()
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out testfix.SyncBuffer
	args = append([]string{"serve", "--grpc-addr", "-", "--http-addr", addr, "--metrics-addr", "127.0.0.1:0", "--cluster-probe-interval", "200ms", "--log-level", "warn"}, args...)
	go func() { done <- cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			assert.Equal(t, 0, code, out.String())
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	})
	controlplane.Eventually(t, 30*time.Second, "/readyz", func() error {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d (%s)", resp.StatusCode, out.String())
		}
		return nil
	})
	return addr
}

// TestServeWatchAndSweepInEveryCluster: `serve --watch --gc-interval` with two clusters
// runs a watcher and a sweeper in each: ReplicaSets in a and b are attached without any
// event, orphans in both are collected, and with --leader-elect each cluster's sweepers
// elect on their own Lease in the default cluster. A cluster added later through an Argo
// CD Secret gets its watcher too, and loses it when the Secret goes.
func TestServeWatchAndSweepInEveryCluster(t *testing.T) {
	a, b := needPlanes(t)
	ctx := context.Background()

	t.Run("kubeconfig contexts", func(t *testing.T) {
		const ns = "percluster"
		kc := controlplane.MergedKubeconfig(t, cpA, cpB)
		serveCLI(t, "--kubeconfig", kc, "--cluster", "a", "--cluster", "b", "--watch",
			"--gc-interval", "500ms", "--gc-min-age", "1s", "--gc-keep", "0", "--leader-elect", "--leader-elect-namespace", "default")
		rsA, ownersA := testfix.ListedFixture(t, a, ns, "web", "cfg-web")
		rsB, ownersB := testfix.ListedFixture(t, b, ns, "web", "cfg-web")
		orphan(t, a, ns, "old-a")
		orphan(t, b, ns, "old-b")
		controlplane.Eventually(t, 60*time.Second, "both ReplicaSets attached by their cluster's watcher", func() error {
			if oa, ob := ownersA(t), ownersB(t); !slices.Equal(oa, []string{string(rsA.UID)}) || !slices.Equal(ob, []string{string(rsB.UID)}) {
				return fmt.Errorf("a: %v, b: %v", oa, ob)
			}
			return nil
		})
		controlplane.Eventually(t, 60*time.Second, "the orphans of both clusters collected", func() error {
			if exists(t, a, ns, "old-a") || exists(t, b, ns, "old-b") {
				return fmt.Errorf("old-a exists: %v, old-b exists: %v", exists(t, a, ns, "old-a"), exists(t, b, ns, "old-b"))
			}
			return nil
		})
		// The attached revisions are kept by both sweepers.
		assert.True(t, exists(t, a, ns, "cfg-web"))
		assert.True(t, exists(t, b, ns, "cfg-web"))
		for _, lease := range []string{"configmap-attacher-gc", "configmap-attacher-gc-b"} {
			l, err := a.Client().CoordinationV1().Leases("default").Get(ctx, lease, metav1.GetOptions{})
			require.NoError(t, err, "Lease %s in the default cluster", lease)
			assert.NotEmpty(t, *l.Spec.HolderIdentity, lease)
		}
		_, err := b.Client().CoordinationV1().Leases("default").Get(ctx, "configmap-attacher-gc", metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "no Lease in member b: %v", err)
	})

	t.Run("Argo CD cluster Secret", func(t *testing.T) {
		const ns = "percluster-argo"
		kcA := a.Client()
		// Its own Argo CD namespace: other tests register b through Secrets in "argocd".
		const argocd = "percluster-argocd"
		_, err := kcA.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argocd}}, metav1.CreateOptions{})
		require.NoError(t, err)
		serveCLI(t, "--kubeconfig", controlplane.MergedKubeconfig(t, cpA, cpB), "--context", "a", "--cluster-name", "hub",
			"--argocd-clusters", argocd, "--watch")
		rs1, owners1 := testfix.ListedFixture(t, b, ns, "web-1", "cfg-1")
		time.Sleep(time.Second)
		assert.Empty(t, owners1(t), "b is not served yet")
		secrets := kcA.CoreV1().Secrets(argocd)
		sec := clusterSecret(b, argocd, "percluster-b", "member-b")
		_, err = secrets.Create(ctx, sec, metav1.CreateOptions{})
		require.NoError(t, err)
		controlplane.Eventually(t, 60*time.Second, "the new cluster's watcher to attach", func() error {
			if o := owners1(t); !slices.Equal(o, []string{string(rs1.UID)}) {
				return fmt.Errorf("owners %v", o)
			}
			return nil
		})
		require.NoError(t, secrets.Delete(ctx, "percluster-b", metav1.DeleteOptions{}))
		time.Sleep(2 * time.Second) // the informer sees the delete; the watcher stops
		_, owners2 := testfix.ListedFixture(t, b, ns, "web-2", "cfg-2")
		time.Sleep(3 * time.Second)
		assert.Empty(t, owners2(t), "a removed cluster's watcher no longer attaches")
	})
}
