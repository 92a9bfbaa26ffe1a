package cache

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// The cache reports synced before its Deployment and Rollout informers have started
// (lazyListers). The first sweep right after start, of a namespace where only a
// Deployment's and a Rollout's annotation list a revision (no ReplicaSet started them),
// must see both when Workloads answers complete: a complete answer without them would
// plan that revision as unused (safety rule 7).
func TestFirstSweepRightAfterStartSeesEveryDeploymentAndRollout(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-1",
		Annotations: map[string]string{core.AnnotationConfigMaps: "cfg"}}}
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": core.RolloutGroup + "/" + core.RolloutVersion, "kind": core.RolloutKind,
		"metadata": map[string]any{"name": "canary", "namespace": "shop", "uid": "ro-1",
			"annotations": map[string]any{core.AnnotationConfigMaps: "cfg"}}}}
	c, wctx := runWithASlowDeploymentList(t, dep, ro)
	require.False(t, c.listers.wanted.Load(), "nothing needed the listers before the sweep")

	objs, complete := c.Workloads(wctx, "shop")
	require.True(t, complete, "the first sweep waits for the listers, then answers")
	var names []string
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			names = append(names, m.GetName())
		}
	}
	assert.ElementsMatch(t, []string{"web", "canary"}, names, "a complete answer without the listing workloads")
}

// runWithASlowDeploymentList runs a synced cache of dep and rollouts (served) whose first
// Deployment list fails (a timeout of a cluster of many Deployments): the user informers
// sync before the Deployment one, which lists again after its backoff.
func runWithASlowDeploymentList(t *testing.T, dep *appsv1.Deployment, rollouts ...runtime.Object) (*Cache, context.Context) {
	t.Helper()
	kc := fake.NewClientset(dep)
	var lists atomic.Int64
	kc.PrependReactor("list", "deployments", func(clienttesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			return true, nil, apierrors.NewTimeoutError("listing Deployments", 1)
		}
		return false, nil, nil
	})
	kc.Resources = []*metav1.APIResourceList{{GroupVersion: core.RolloutGroup + "/" + core.RolloutVersion,
		APIResources: []metav1.APIResource{{Name: core.RolloutResource, Namespaced: true, Kind: core.RolloutKind}}}}
	dc := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"}, rollouts...)
	c, err := New(&kube.Clients{Kube: kc, Dynamic: dc, Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())},
		Options{Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done) })
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(wcancel)
	require.NoError(t, c.WaitForSync(wctx))
	return c, wctx
}

// An attach right after start reads its users live until the Deployment informer has
// synced, even once the user informers have (the Deployment one lists slower): a cached
// answer without the Deployment that lists the revision would leave its ReplicaSets
// uncovered (safety rules 3 and 11).
func TestAnAttachRightAfterStartSeesTheDeploymentThatListsTheRevision(t *testing.T) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "dep-1",
		Annotations: map[string]string{core.AnnotationConfigMaps: "cfg"}}}
	c, ctx := runWithASlowDeploymentList(t, dep)
	require.True(t, c.startUsers(), "the attach's first Users starts the user and lister informers")
	require.Eventually(t, func() bool {
		for _, inf := range c.userInfs {
			if !inf.HasSynced() {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "the user informers sync")

	u, err := c.Users(ctx, core.KindConfigMap, "shop", "cfg")
	require.NoError(t, err)
	var names []string
	for _, d := range u.Deployments {
		names = append(names, d.Name)
	}
	assert.Equal(t, []string{"web"}, names, "the Deployment that lists the revision")
}
