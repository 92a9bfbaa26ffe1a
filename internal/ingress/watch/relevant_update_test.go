package watch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// relevantUpdate skips updates without a generation, owner, label or annotation change.
// On a real apiserver, editing only a ReplicaSet's pod template (a new ConfigMap name)
// bumps its generation, so the watcher attaches the new ConfigMap from the update event
// alone (the resync is 10 minutes, far beyond this test).
func TestTemplateEditIsNotSkipped(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	ctx := context.Background()
	const ns = "watcher-template-edit"
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"cfg-a", "cfg-b"} {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	stop := runWatcher(t, &kube.RequestCounter{})
	defer stop()
	rs := createRS(t, kc, ns, "web", "cfg-a")
	controlplane.Eventually(t, 20*time.Second, "cfg-a attached", func() error { return ownedBy(kc, ns, "cfg-a", rs) })

	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := kc.AppsV1().ReplicaSets(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.Template.Spec.Volumes[0].ConfigMap.Name = "cfg-b"
		_, err = kc.AppsV1().ReplicaSets(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}))
	cur, err := kc.AppsV1().ReplicaSets(ns).Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	require.Greater(t, cur.Generation, rs.Generation, "a template edit bumps the generation")
	controlplane.Eventually(t, 20*time.Second, "cfg-b attached after the template edit", func() error { return ownedBy(kc, ns, "cfg-b", rs) })
}
