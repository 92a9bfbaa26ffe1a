package clusters_test

import (
	"context"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestPartitionedArgoCDClusterIsRemovedPromptly: an Argo CD cluster whose network is gone
// (requests hang, nothing is refused) while its watcher has ReplicaSets to handle. Its
// Secret is deleted; the registry must go on processing Argo CD Secrets: a cluster
// added next is served promptly, and serve still stops promptly.
func TestPartitionedArgoCDClusterIsRemovedPromptly(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, argocd := namespace(t, b, "break-hung"), namespace(t, a, "break-hung-argocd")
	u, err := url.Parse(b.ServerURL())
	require.NoError(t, err)
	proxy := testfix.NewHangProxy(t, u.Host) // Hang: a network partition (no answer, no reset)

	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{Watch: true, WatchResync: 500 * time.Millisecond})
	secrets := a.Client().CoreV1().Secrets(argocd)
	hung := clusterSecret(b, argocd, "hung", "hung")
	hung.StringData["server"] = "https://" + proxy.Addr()
	createSecret(t, a, hung)

	// ReplicaSets naming a ConfigMap that does not exist: every resync makes the watcher
	// read it live (a cache miss).
	zero := int32(0)
	for i := range 8 {
		labels := map[string]string{"app": fmt.Sprintf("hung-%d", i)}
		_, err := b.Client().AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hung-%d", i), Labels: labels,
				Annotations: map[string]string{core.AnnotationConfigMaps: fmt.Sprintf("missing-%d", i)}},
			Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	controlplane.Eventually(t, 30*time.Second, "hung's sweeper started (caches synced)", func() error {
		if code, body := s.gcDryRun(t, "hung", ns); code != 200 {
			return fmt.Errorf("gc hung: %d %s", code, body)
		}
		return nil
	})
	time.Sleep(time.Second) // a resync or two through the watcher

	proxy.Hang()
	time.Sleep(2 * time.Second) // the next resyncs hang in live reads
	require.NoError(t, secrets.Delete(ctx, "hung", metav1.DeleteOptions{}))
	next := clusterSecret(b, argocd, "next", "next")
	createSecret(t, a, next)
	start := time.Now()
	controlplane.Eventually(t, 20*time.Second, "the next Argo CD cluster served", func() error {
		if code, body := s.gcDryRun(t, "next", ns); code != 200 {
			return fmt.Errorf("gc next: %d %s", code, body)
		}
		return nil
	})
	t.Logf("next served %s after its Secret was created", time.Since(start).Round(time.Millisecond))
	s.stop(t)
}
