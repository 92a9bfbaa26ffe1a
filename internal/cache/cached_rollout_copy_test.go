package cache

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Breaker s5: "every object returned is decoded from the stored record: the caller's own
// copy" (package doc) holds for every kind but the Rollout: Cache.Rollout and
// Cache.Workloads hand out the informer's stored *unstructured.Unstructured, so a reader
// that edits what it got (a defaulting helper, SetAnnotations on a "copy") edits the
// cache for every later reader, and the informer's next compare.
func TestCachedRolloutIsTheReadersOwnCopy(t *testing.T) {
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": core.RolloutGroup + "/" + core.RolloutVersion, "kind": core.RolloutKind,
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "ro-1",
			"annotations": map[string]any{core.Prefix + "configmaps": "cfg"}},
		"spec": map[string]any{"replicas": int64(1)}}}
	kc := fake.NewClientset()
	kc.Resources = []*metav1.APIResourceList{{GroupVersion: core.RolloutGroup + "/" + core.RolloutVersion,
		APIResources: []metav1.APIResource{{Name: core.RolloutResource, Namespaced: true, Kind: core.RolloutKind}}}}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"}, ro)
	c, err := New(&kube.Clients{Kube: kc, Dynamic: dc, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())},
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return c.listers.served.Load() && c.HasSynced() }, 10*time.Second, 10*time.Millisecond)
	_, err = c.Rollout(ctx, "shop", "web") // live: the first read starts the Rollout informer (lazyListers)
	require.NoError(t, err)
	require.Eventually(t, c.listersReady, 10*time.Second, 10*time.Millisecond)
	misses := c.Misses("rollouts")

	got, err := c.Rollout(ctx, "shop", "web")
	require.NoError(t, err)
	require.Equal(t, misses, c.Misses("rollouts"), "served from the cache")
	got.SetAnnotations(map[string]string{core.Prefix + "configmaps": "mutated"})
	again, err := c.Rollout(ctx, "shop", "web")
	require.NoError(t, err)
	assert.Equal(t, "cfg", again.GetAnnotations()[core.Prefix+"configmaps"], "a reader's edit of its Rollout reaches the cache")

	objs, _ := c.Workloads(ctx, "shop")
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok {
			u.SetUID("mutated")
		}
	}
	again, err = c.Rollout(ctx, "shop", "web")
	require.NoError(t, err)
	assert.Equal(t, "ro-1", string(again.GetUID()), "a sweep's edit of a Workloads object reaches the cache")
}
