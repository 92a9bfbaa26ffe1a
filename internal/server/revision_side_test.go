package server_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testfix"
)

// Safety rule 9, on a service whose only ways in are gRPC and HTTP (no --watch, no
// event ever sent): a revision that appears after its ReplicaSet is attached from its
// own creation, and one whose ownerReferences a PUT wiped (kubectl replace, Argo CD
// Replace=true) gets them back, with an Attached Event; an unrelated ConfigMap and an
// unused revision cause no write.
func TestRevisionSideAttachesLateAndWipedRevisions(t *testing.T) {
	c := controlplane.Require(t, cp)
	kc := c.Client()
	ctx := context.Background()
	const ns = "revision-side"
	testfix.CreateNamespace(t, kc, ns)
	counter := &kube.RequestCounter{}
	srv := startServer(t, server.Options{}, counter, "http", http.DefaultClient)
	rs := testfix.CreateReplicaSet(t, kc, ns, "web-1", "late-cfg")
	controlplane.Eventually(t, 10*time.Second, "the ReplicaSet in the cache", func() error {
		_, err := srv.Cache().ReplicaSet(ctx, ns, rs.Name)
		return err
	})

	t.Run("a revision created after its ReplicaSet is attached", func(t *testing.T) {
		start := time.Now()
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "late-cfg"), metav1.CreateOptions{})
		require.NoError(t, err)
		waitOwned(t, kc, ns, "late-cfg", rs)
		t.Logf("attached %s after its creation", time.Since(start).Round(time.Millisecond))
	})
	t.Run("ownerReferences wiped by a PUT are restored", func(t *testing.T) {
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "late-cfg", metav1.GetOptions{})
		require.NoError(t, err)
		cm.OwnerReferences = nil
		_, err = kc.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		start := time.Now()
		waitOwned(t, kc, ns, "late-cfg", rs)
		t.Logf("restored %s after the PUT", time.Since(start).Round(time.Millisecond))
		controlplane.Eventually(t, 10*time.Second, "Attached Events", func() error {
			evs, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=late-cfg,reason=Attached"})
			if err != nil {
				return err
			}
			var n int32
			for _, e := range evs.Items {
				n += max(e.Count, 1)
			}
			if n < 2 {
				return fmt.Errorf("%d Attached Events; want the attach and the restore told", n)
			}
			return nil
		})
	})
	t.Run("an unrelated ConfigMap and an unused revision cause no write", func(t *testing.T) {
		before := counter.Writes()
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-settings"}}, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "unused-rev"), metav1.CreateOptions{})
		require.NoError(t, err)
		controlplane.Eventually(t, 10*time.Second, "the ConfigMaps in the cache", func() error {
			_, err := srv.Cache().ObjectMeta(ctx, core.KindConfigMap, ns, "unused-rev")
			return err
		})
		assert.Equal(t, before, counter.Writes())
	})
}
