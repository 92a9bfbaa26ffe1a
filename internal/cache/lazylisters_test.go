package cache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// An idle cache does not watch Deployments (docs/design.md, "Per-cluster cost"): a
// ReplicaSet nobody controls, or one another kind controls, starts nothing;
// what needs them starts them and, once they have synced, the OnListersSynced functions
// are called (the revision side's replay) and Listed answers from them.
func TestDeploymentInformerStartsOnlyOnceTheClusterNeedsIt(t *testing.T) {
	listing := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-1",
		Annotations: map[string]string{core.AnnotationConfigMaps: "cfg"}}}
	controlled := func(kind string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "rs-1",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: "web", UID: "dep-1", Controller: new(true)}}}}
	}
	for _, tc := range []struct {
		name string
		need func(t *testing.T, c *Cache, create func(*appsv1.ReplicaSet))
	}{
		{"a ReplicaSet a Deployment controls is cached", func(_ *testing.T, _ *Cache, create func(*appsv1.ReplicaSet)) {
			create(controlled("Deployment"))
		}},
		{"a ReplicaSet a Rollout controls is cached", func(_ *testing.T, _ *Cache, create func(*appsv1.ReplicaSet)) {
			create(controlled(core.RolloutKind))
		}},
		{"a Deployment is read", func(t *testing.T, c *Cache, _ func(*appsv1.ReplicaSet)) {
			_, err := c.Deployment(context.Background(), "shop", "web")
			require.NoError(t, err)
		}},
		{"a Users answer is asked for", func(t *testing.T, c *Cache, _ func(*appsv1.ReplicaSet)) {
			_, err := c.Users(context.Background(), core.KindConfigMap, "shop", "cfg")
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, kc := runFakeCache(t, Options{}, listing)
			synced := make(chan struct{})
			var listed []string
			c.OnListersSynced(func(l []string) { listed = l; close(synced) })
			ctx := context.Background()
			mk := func(rs *appsv1.ReplicaSet) {
				create(t, kc, rs)
				_, ok := c.AwaitReplicaSet(ctx, rs.Namespace, rs.Name, rs.UID)
				require.True(t, ok, "cached") // its handlers, the controller's look included, have run
			}
			mk(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "loose", UID: "rs-0"}})
			mk(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "sts-rev", UID: "rs-2",
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-1", Controller: new(true)}}}})
			assert.False(t, c.listers.wanted.Load(), "started by a ReplicaSet no Deployment or Rollout controls")
			assert.False(t, c.Listed(core.KindConfigMap, "shop", "cfg"), "listed before the Deployments are cached")

			tc.need(t, c, mk)
			select {
			case <-synced:
			case <-time.After(10 * time.Second):
				t.Fatal("the Deployment informer did not sync")
			}
			assert.True(t, c.Listed(core.KindConfigMap, "shop", "cfg"), "the Deployment's listing")
			assert.Equal(t, []string{core.UsesKey(core.KindConfigMap, "shop", "cfg")}, listed, "what the synced informer's workloads list")
		})
	}
}
