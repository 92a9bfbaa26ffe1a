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

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// revisionLag is how long after its ReplicaSet a late revision is created (External
// Secrets, Sealed Secrets, a slow CI step).
const revisionLag = 5 * time.Second

// Safety rule 9 on every way in the service can run with (gRPC and HTTP only, the
// EventBus subscription, the built-in watcher), no ReplicaSet event ever sent after the
// ReplicaSet appeared: a revision created 5 s after its ReplicaSet is attached from its
// own creation, opted in by label or (unlabelled) listed by the ReplicaSet's annotation;
// one created before its first ReplicaSet is attached when that ReplicaSet appears (its
// first use: a GitOps sync creates the revision first and a later one could prune it
// until it is owned); one whose ownerReferences a PUT wiped (kubectl replace, Argo CD Replace=true) gets them
// back, with an Attached Event; an unrelated ConfigMap and an unused revision cause no
// write. The times are logged, not asserted.
func TestRevisionSideAttachesLateAndWipedRevisions(t *testing.T) {
	ways := []struct {
		name    string
		ingress func(t *testing.T) server.Ingress
	}{
		{"gRPC and HTTP only", func(*testing.T) server.Ingress { return server.Ingress{} }},
		{"EventBus subscription", func(t *testing.T) server.Ingress {
			bus, err := natsserver.Start(context.Background(), natsserver.Options{})
			require.NoError(t, err)
			t.Cleanup(bus.Stop)
			return server.Ingress{EventBus: &eventbus.SubscriberOptions{URL: bus.ClientURL(), TLS: eventbus.TLS{CAFile: bus.CAFile()}, CreateStream: true}}
		}},
		{"built-in watcher", func(*testing.T) server.Ingress { return server.Ingress{Watch: true} }},
	}
	for i, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			revisionSide(t, fmt.Sprintf("revision-side-%d", i), way.ingress(t))
		})
	}
}

func revisionSide(t *testing.T, ns string, in server.Ingress) {
	c := controlplane.Require(t, cp)
	kc := c.Client()
	ctx := context.Background()
	testfix.CreateNamespace(t, kc, ns)
	counter := &kube.RequestCounter{}
	srv := startServer(t, server.Options{Ingress: in}, counter, "http", http.DefaultClient)
	rs := testfix.ReplicaSet("web-1", "late-cfg")
	rs.Annotations = map[string]string{core.AnnotationConfigMaps: "listed-cfg"}
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 10*time.Second, "the ReplicaSet in the cache", func() error {
		_, err := srv.Cache().ReplicaSet(ctx, ns, rs.Name)
		return err
	})
	time.Sleep(time.Until(rs.CreationTimestamp.Add(revisionLag))) // the scenario, not a timing assertion

	late := []struct{ name, cm string }{
		{"an opted-in revision created after its ReplicaSet is attached", "late-cfg"},
		{"an unlabelled revision the ReplicaSet's annotation lists, created after it, is attached", "listed-cfg"},
	}
	for _, tc := range late {
		t.Run(tc.name, func(t *testing.T) {
			cm := testfix.Revision(ns, tc.cm)
			if tc.cm == "listed-cfg" {
				cm.Labels = nil
			}
			start := time.Now()
			_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
			require.NoError(t, err)
			waitOwned(t, kc, ns, tc.cm, rs)
			t.Logf("%s created %s after its ReplicaSet, attached %s after its creation",
				tc.cm, start.Sub(rs.CreationTimestamp.Time).Round(time.Second), time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("ownerReferences wiped by a PUT are restored", func(t *testing.T) {
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "late-cfg", metav1.GetOptions{})
		require.NoError(t, err)
		cm.OwnerReferences = nil
		_, err = kc.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		start := time.Now()
		waitOwned(t, kc, ns, "late-cfg", rs)
		t.Logf("restored %s after the PUT", time.Since(start).Round(time.Millisecond))
		waitAttachedEvents(t, ns, "late-cfg", 2)
	})
	t.Run("an opted-in revision created before its first ReplicaSet is attached when that ReplicaSet appears", func(t *testing.T) {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "early-cfg"), metav1.CreateOptions{})
		require.NoError(t, err)
		controlplane.Eventually(t, 10*time.Second, "the revision in the cache", func() error {
			_, err := srv.Cache().ObjectMeta(ctx, core.KindConfigMap, ns, "early-cfg")
			return err
		})
		first, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, testfix.ReplicaSet("web-2", "early-cfg"), metav1.CreateOptions{})
		require.NoError(t, err)
		start := time.Now()
		waitOwned(t, kc, ns, "early-cfg", first)
		t.Logf("early-cfg attached %s after its first ReplicaSet was created", time.Since(start).Round(time.Millisecond))
		waitAttachedEvents(t, ns, "early-cfg", 1) // told (the Event is written after the owner)
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

// waitAttachedEvents waits until ConfigMap name has at least want Attached Events
// (counting repeats): the attach and each restore are told.
func waitAttachedEvents(t *testing.T, ns, name string, want int) {
	t.Helper()
	kc := controlplane.Require(t, cp).Client()
	controlplane.Eventually(t, 10*time.Second, "Attached Events", func() error {
		n, err := testfix.AttachedEvents(context.Background(), kc, ns, name)
		if err != nil {
			return err
		}
		if n < want {
			return fmt.Errorf("%d Attached Events; want %d", n, want)
		}
		return nil
	})
}
