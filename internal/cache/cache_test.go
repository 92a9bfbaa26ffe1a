package cache

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Unit test of the cache's hit/miss logic with fake clients; the server's integration
// test proves it on the real control plane (a replay costs no request).
func TestCacheHitsMissesAndAbsentRolloutCRD(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "rs-1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}}}
	kc := fake.NewClientset(rs)
	scheme := metadatafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	mc := metadatafake.NewSimpleMetadataClient(scheme, &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cfg-1", Namespace: "shop", UID: "cm-1"}})
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})

	c, err := New(&kube.Clients{Kube: kc, Dynamic: dc, Metadata: mc}, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	assert.False(t, c.HasSynced())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	require.NoError(t, c.WaitForSync(wctx))

	got, err := c.ReplicaSet(ctx, "shop", "web-1")
	require.NoError(t, err)
	assert.Equal(t, rs.UID, got.UID)
	assert.Empty(t, got.ManagedFields, "managedFields are stripped from cached objects")
	assert.Zero(t, c.Misses("replicasets"))

	_, err = c.ReplicaSet(ctx, "shop", "web-2")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Equal(t, int64(1), c.Misses("replicasets"), "a miss falls back to a live GET")

	m, err := c.ObjectMeta(ctx, core.KindConfigMap, "shop", "cfg-1")
	require.NoError(t, err)
	assert.Equal(t, "cm-1", string(m.UID))
	assert.Zero(t, c.Misses("configmaps"))

	// Secrets are not cached unless enabled: a live metadata GET.
	_, err = c.ObjectMeta(ctx, core.KindSecret, "shop", "s")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Equal(t, int64(1), c.Misses("secrets"))

	// No Argo Rollouts API: the cache is synced anyway and a Rollout is read live.
	assert.True(t, c.HasSynced())
	_, err = c.Rollout(ctx, "shop", "web")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Equal(t, int64(1), c.Misses("rollouts"))
}

func TestRunTwice(t *testing.T) {
	c, err := New(&kube.Clients{Kube: fake.NewClientset(), Dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()),
		Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())}, Options{})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for !c.running.Load() {
		time.Sleep(time.Millisecond)
	}
	assert.Error(t, c.Run(ctx))
	cancel()
	require.NoError(t, <-done)
}
