package cache

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

func fullReplicaSet() *appsv1.ReplicaSet {
	tmpl := template("cfg-1")
	tmpl.Annotations[core.AnnotationSecrets] = "tls"
	tmpl.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}}}}
	m := objMeta("web-1", "rs-1", controller("Deployment", "web", "d-1"))
	m.Labels[core.DeploymentHashKey] = "5d8f"
	m.Annotations[core.DeploymentRevisionAnnotation] = "3"
	m.Annotations[core.AnnotationConfigMaps] = "extra"
	m.Generation = 2
	return &appsv1.ReplicaSet{ObjectMeta: m, Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(2)), Template: tmpl},
		Status: appsv1.ReplicaSetStatus{ReadyReplicas: 1, Replicas: 2}}
}

func fullRollout(t *testing.T) *unstructured.Unstructured {
	rs := fullReplicaSet()
	tm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rs.Spec.Template)
	require.NoError(t, err)
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": core.RolloutKind,
		"spec": map[string]any{"replicas": int64(3), "template": tm, "strategy": map[string]any{"canary": map[string]any{}},
			"revisionHistoryLimit": int64(1), "rollbackWindow": map[string]any{"revisions": int64(3)}},
		"status": map[string]any{"currentPodHash": "abc"}}}
	u.SetName("web")
	u.SetNamespace("shop")
	u.SetUID("ro-1")
	u.SetAnnotations(map[string]string{core.AnnotationConfigMaps: "extra", "notes": "long"})
	return u
}

// The lean objects answer every question the core, the uses index and the sweep ask
// exactly as the full objects do, and keep nothing else of the template.
func TestLeanKeepsWhatCoreAndSweepRead(t *testing.T) {
	rs := fullReplicaSet()
	ro := fullRollout(t)
	dep := &appsv1.Deployment{ObjectMeta: objMeta("web", "d-1", nil), Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(2)), Template: rs.Spec.Template},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, ReadyReplicas: 2}}
	for _, tc := range []struct {
		name string
		obj  any
	}{{"ReplicaSet", rs}, {"Deployment", dep}, {"Rollout", ro}} {
		t.Run(tc.name, func(t *testing.T) {
			lean, err := Lean(tc.obj)
			require.NoError(t, err)
			assert.Equal(t, core.ObjectRefs(tc.obj), core.ObjectRefs(lean))
			assert.Equal(t, core.UsesKeys(tc.obj), core.UsesKeys(lean))
			m := lean.(metav1.Object)
			assert.Empty(t, m.GetManagedFields())
			assert.NotContains(t, m.GetAnnotations(), "kubectl.kubernetes.io/last-applied-configuration")
			again, err := Lean(lean)
			require.NoError(t, err)
			assert.Equal(t, lean, again, "Lean is idempotent")
		})
	}
	lrs := must(Lean(rs)).(*appsv1.ReplicaSet)
	assert.Empty(t, lrs.Labels, "no label is read from the caches")
	assert.Equal(t, map[string]string{core.AnnotationConfigMaps: "extra"}, lrs.Annotations)
	assert.Equal(t, int64(2), lrs.Generation)
	assert.Equal(t, int32(2), *lrs.Spec.Replicas)
	assert.Equal(t, int32(1), lrs.Status.ReadyReplicas)
	assert.Empty(t, lrs.Spec.Template.Spec.Containers[0].Image)
	assert.Len(t, lrs.Spec.Template.Spec.Volumes, 1, "volumes without a config reference are dropped")
	lro := must(Lean(ro)).(*unstructured.Unstructured)
	_, hasStrategy, _ := unstructured.NestedMap(lro.Object, "spec", "strategy")
	assert.False(t, hasStrategy)
	assert.Equal(t, int64(3), lro.Object["spec"].(map[string]any)["replicas"])
	assert.Equal(t, core.RollbackWindowNote(ro), core.RollbackWindowNote(lro), "the rollback window is judged from the cache")
	assert.NotEmpty(t, core.RollbackWindowNote(lro))
}

func must(v any, err error) any {
	if err != nil {
		panic(err)
	}
	return v
}

// The initial list is read page by page, each page reduced before the next is asked
// for, and the result is one complete list at the first page's resourceVersion.
func TestPagedLeanListReducesEachPage(t *testing.T) {
	for _, size := range []int64{pageSize, metaPageSize} {
		t.Run(fmt.Sprintf("pages of %d", size), func(t *testing.T) {
			total := int(size)*2 + 234
			var calls []metav1.ListOptions
			list := func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
				calls = append(calls, o)
				start := 0
				if o.Continue != "" {
					_, err := fmt.Sscan(o.Continue, &start)
					require.NoError(t, err)
				}
				out := &appsv1.ReplicaSetList{ListMeta: metav1.ListMeta{ResourceVersion: "77"}}
				for i := start; i < min(start+int(o.Limit), total); i++ {
					rs := fullReplicaSet()
					rs.Name = fmt.Sprintf("rs-%d", i)
					out.Items = append(out.Items, *rs)
				}
				if start+int(o.Limit) < total {
					out.Continue = fmt.Sprint(start + int(o.Limit))
				}
				return out, nil
			}
			reduced := 0
			transform := func(obj any) (any, error) { reduced++; return Lean(obj) }
			got, err := pagedLeanList(list, transform, size)(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 10})
			require.NoError(t, err)
			l := got.(*leanList)
			assert.Len(t, l.Items, total)
			assert.Equal(t, total, reduced)
			assert.Equal(t, "77", l.ResourceVersion)
			assert.Empty(t, l.Continue)
			assert.Empty(t, l.Items[total-1].(*appsv1.ReplicaSet).Spec.Template.Spec.Containers[0].Image)
			items, err := meta.ExtractListWithAlloc(l)
			require.NoError(t, err)
			assert.Same(t, l.Items[0], items[0], "the reflector reads the reduced objects themselves")
			require.Len(t, calls, 3)
			for _, c := range calls {
				assert.Equal(t, size, c.Limit, "the list's own page size, whatever the reflector asked")
				assert.Empty(t, c.ResourceVersion, "a consistent read: pages share one snapshot")
			}
		})
	}
}
