package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestOnDemandSweepStopsWhenItsClusterIsRemoved: an `operation: gc` sweep ends with
// the event's context or with its cluster's runtime, whichever ends first, so that a
// cluster removed (its Argo CD Secret deleted, or replaced with new credentials) or
// owned by another replica in the middle of a sweep gets no further delete from it. (A
// fake clientset: the lifetime is the directory's logic, the deletes themselves are
// proven on the real control plane in internal/gc.)
func TestOnDemandSweepStopsWhenItsClusterIsRemoved(t *testing.T) {
	const ns, orphans = "shop", 20
	old := metav1.NewTime(time.Now().Add(-48 * time.Hour))
	scheme := metafake.NewTestScheme()
	require.NoError(t, metav1.AddMetaToScheme(scheme))
	var metas, cms []runtime.Object
	for i := range orphans {
		om := metav1.ObjectMeta{Name: fmt.Sprintf("cfg-%02d", i), Namespace: ns, UID: types.UID(fmt.Sprint("uid-", i)), ResourceVersion: "7",
			CreationTimestamp: old, Labels: map[string]string{core.LabelRevision: "true"}}
		metas = append(metas, &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: om})
		cms = append(cms, &corev1.ConfigMap{ObjectMeta: om})
	}
	mc := metafake.NewSimpleMetadataClient(scheme, metas...)
	kc := fake.NewClientset(cms...)
	life, remove := context.WithCancel(context.Background())
	defer remove()
	var deletes atomic.Int64
	kc.PrependReactor("delete", "configmaps", func(k8stesting.Action) (bool, runtime.Object, error) {
		if deletes.Add(1) == 1 {
			remove() // the cluster's Secret is deleted while the sweep is under way
		}
		return false, nil, nil
	})
	quiet := testfix.Quiet()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})
	sw, err := gc.NewSweeper(gc.Config{Cluster: "member", Client: kc, Metadata: mc, Logger: quiet, Parallel: 1,
		Source:  gc.LiveSource{Client: kc, Metadata: mc, Dynamic: dyn},
		Options: gc.Options{MinAge: time.Hour, Keep: 0}})
	require.NoError(t, err)
	rt := &Runtime{Cluster: Cluster{Spec: Spec{Name: "member"}}, Sweeper: sw, ran: make(chan struct{}), life: life}
	close(rt.ran)
	dir := NewDirectory(false)
	dir.set("member", route{rt: rt})

	_, err = dir.Sweep(context.Background(), "member", ns, false)
	assert.ErrorIs(t, err, core.ErrUnavailable, "a sweep cut short is retried (and then meets the unknown cluster or its owner)")
	assert.Equal(t, int64(1), deletes.Load(), "deletes sent to the cluster once it was removed")
}
