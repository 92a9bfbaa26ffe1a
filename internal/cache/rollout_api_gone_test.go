package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// The Argo Rollouts API is found at start, but the Rollout informer starts only once the
// cluster needs it (lazyListers); if the CRD is removed in between (Argo Rollouts
// uninstalled while the cluster was idle), that informer's list answers NotFound for
// ever and it never syncs. A cluster whose Rollouts API is gone must be swept as one
// that never had it (Workloads complete once the API is confirmed absent), not refused
// on every sweep until the service restarts; and cached again once it is back.
func TestSweepIsNotRefusedForeverWhenTheRolloutAPIGoesBeforeItsInformerStarts(t *testing.T) {
	prev := usersSyncWait
	usersSyncWait = 200 * time.Millisecond
	t.Cleanup(func() { usersSyncWait = prev })
	var gone atomic.Bool
	notFound := func(clienttesting.Action) (bool, runtime.Object, error) {
		if !gone.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: core.RolloutGroup, Resource: core.RolloutResource}, "")
	}
	kc := fake.NewClientset()
	kc.Resources = []*metav1.APIResourceList{{GroupVersion: core.RolloutGroup + "/" + core.RolloutVersion,
		APIResources: []metav1.APIResource{{Name: core.RolloutResource, Namespaced: true, Kind: core.RolloutKind}}}}
	kc.PrependReactor("get", "resource", notFound) // discovery
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})
	dc.PrependReactor("list", core.RolloutResource, notFound)
	dc.PrependWatchReactor(core.RolloutResource, func(clienttesting.Action) (bool, watch.Interface, error) {
		if !gone.Load() {
			return false, nil, nil
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: core.RolloutGroup, Resource: core.RolloutResource}, "")
	})
	c, err := New(&kube.Clients{Kube: kc, Dynamic: dc, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())},
		Options{Logger: testfix.Quiet(), RolloutPoll: 50 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return c.listers.served.Load() && c.HasSynced() }, 10*time.Second, 10*time.Millisecond)
	require.False(t, c.listers.wanted.Load(), "idle: nothing needed the listers yet")

	gone.Store(true) // the CRD is removed while the cluster is idle
	require.Eventually(t, func() bool {
		_, complete := c.Workloads(ctx, "shop")
		return complete
	}, 3*absentCheckEvery, 100*time.Millisecond, "every sweep refused: the Rollout informer of a removed API never syncs")

	gone.Store(false) // installed again: found and cached again
	require.Eventually(t, func() bool { return c.rollouts.Load() != nil && c.listersReady() }, 3*absentCheckEvery, 10*time.Millisecond,
		"the Rollout API, served again, is cached again")
}
