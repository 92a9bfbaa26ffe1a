package gc

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// staleStore is a synced cache that has not yet seen the newest workloads: it holds
// the revisions and no workload at all (its watch is behind, or was disconnected: a
// SharedInformer's HasSynced stays true after the first list whatever the watch does).
type staleStore struct {
	revs []*metav1.PartialObjectMetadata
}

func (s staleStore) HasSynced() bool                                 { return true }
func (s staleStore) Covers(string) bool                              { return true }
func (s staleStore) Workloads(context.Context, string) ([]any, bool) { return nil, true }
func (s staleStore) Revisions(k core.Kind, _ string) ([]*metav1.PartialObjectMetadata, bool) {
	if k != core.KindConfigMap {
		return nil, false
	}
	return s.revs, true
}
func (s staleStore) RevisionNamespaces(core.Kind) ([]string, bool) { return []string{"ns"}, true }

// TestCachedSweepStaleCacheDeletesRevisionALivePodUses: an old, unattached revision
// (older than the grace period, outside keep-N) that a Pod created after the cache's
// last event mounts. The cached plan does not see the Pod, and the live confirm reads
// only the revision (same UID and resourceVersion, no owners), so the sweep deletes a
// ConfigMap a live Pod needs. The confirm does not re-check users live; the window is
// the cache's staleness, unbounded while a watch is broken, not "milliseconds".
func TestCachedSweepStaleCacheDeletesRevisionALivePodUses(t *testing.T) {
	old := metav1.NewTime(time.Now().Add(-48 * time.Hour))
	rev := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cfg-old", Namespace: "ns", UID: "uid-cfg-old", ResourceVersion: "7",
			CreationTimestamp: old, Labels: map[string]string{core.LabelRevision: "true"}}}
	scheme := metafake.NewTestScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mc := metafake.NewSimpleMetadataClient(scheme, rev.DeepCopy())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}},
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-old"}}}}}}}
	cm := &corev1.ConfigMap{ObjectMeta: rev.ObjectMeta}
	kc := fake.NewClientset(pod, cm)
	sw, err := NewSweeper(Config{Client: kc, Metadata: mc, Logger: testfix.Quiet(),
		Source:  CachedSource{Store: staleStore{revs: []*metav1.PartialObjectMetadata{rev}}, Live: LiveSource{Client: kc, Metadata: mc, Dynamic: dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"})}},
		Options: Options{MinAge: time.Hour, Keep: 0}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sw.SweepNamespace(context.Background(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	_, getErr := mc.Resource(core.ConfigMapGVR).Namespace("ns").Get(context.Background(), "cfg-old", metav1.GetOptions{})
	_, getErr2 := kc.CoreV1().ConfigMaps("ns").Get(context.Background(), "cfg-old", metav1.GetOptions{})
	if apierrors.IsNotFound(getErr) || apierrors.IsNotFound(getErr2) || rep.Count(OutcomeDeleted) > 0 {
		t.Fatalf("deleted ConfigMap ns/cfg-old that live Pod ns/p mounts (the cache had not seen the Pod): %+v", rep.Results)
	}
}
