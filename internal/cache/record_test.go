package cache

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The stored record is lossless: for every kind a record holds, decoding it gives back
// exactly the lean object (Lean), and its index keys are those of the lean object.
func TestRecordDecodesToTheLeanObjectEveryKind(t *testing.T) {
	isCtrl := true
	for kind, o := range everyRefObjects(t) {
		if kind == "Rollout" {
			continue // Rollouts stay unstructured
		}
		t.Run(kind, func(t *testing.T) {
			a := o.(metav1.Object)
			if len(a.GetOwnerReferences()) == 0 {
				a.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-web", Controller: &isCtrl}})
			}
			a.SetCreationTimestamp(metav1.Unix(1700000000, 0))
			a.SetGeneration(3)
			lean, err := Lean(o)
			require.NoError(t, err)
			stored, err := toRecord(o)
			require.NoError(t, err)
			r, ok := stored.(*record)
			require.True(t, ok, "%T is stored as a record", o)
			got, err := Decode(r)
			require.NoError(t, err)
			if !reflect.DeepEqual(got, lean) {
				t.Errorf("decoded record differs from the lean object:\n got  %#v\n want %#v", got, lean)
			}
			assert.NotEmpty(t, r.uses())
			assert.Equal(t, core.UsesKeys(lean), r.uses(), "uses keys")
			assert.NotEmpty(t, r.listed())
			assert.Equal(t, core.ListedKeys(lean), r.listed(), "listed keys")
			again, err := toRecord(r)
			require.NoError(t, err)
			assert.Same(t, r, again, "a record passes through")
		})
	}
}

// Every read decodes a fresh object: a reader that changes what it got changes nothing
// in the cache.
func TestRecordReadsAreCopies(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: "rs-1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "dep-1"}},
		Annotations:     map[string]string{core.AnnotationConfigMaps: "cfg"}}, Spec: appsv1.ReplicaSetSpec{Template: template("cfg")}}
	stored, err := toRecord(rs)
	require.NoError(t, err)
	first, err := Decode(stored)
	require.NoError(t, err)
	f := first.(*appsv1.ReplicaSet)
	f.OwnerReferences[0].Name = "changed"
	f.Annotations["x"] = "y"
	f.Spec.Template.Spec.Volumes[0].ConfigMap.Name = "changed"
	second, err := Decode(stored)
	require.NoError(t, err)
	lean, err := Lean(rs)
	require.NoError(t, err)
	assert.Equal(t, lean, second)
}

// A config object's metadata record gives back the lean metadata (leanConfigMeta), labels
// and type included, through Decode and through metav1.Object.
func TestMetaRecordDecodesToTheLeanMetadata(t *testing.T) {
	isCtrl := true
	tm := metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}
	meta := func(labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{TypeMeta: tm, ObjectMeta: metav1.ObjectMeta{Name: "cfg-1", Namespace: "shop", UID: "cm-1",
			ResourceVersion: "7", CreationTimestamp: metav1.Unix(1700000000, 0), Labels: labels,
			Annotations:     map[string]string{core.AnnotationSkip: "false", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs-1", Controller: &isCtrl}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
	}{
		{"labels", map[string]string{core.LabelRevision: "true", core.LabelFamily: "app", "team": "payments"}},
		{"no labels", nil},
		{"empty labels", map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lean, err := leanConfigMeta(meta(tc.labels))
			require.NoError(t, err)
			stored, err := toMetaRecord(meta(tc.labels))
			require.NoError(t, err)
			r := stored.(*metaRecord)
			got, err := Decode(r)
			require.NoError(t, err)
			assert.Equal(t, lean, got)
			assert.Equal(t, tc.labels, r.GetLabels())
			v, ok := r.label(core.LabelRevision)
			assert.Equal(t, tc.labels[core.LabelRevision], v)
			assert.Equal(t, tc.labels[core.LabelRevision] != "", ok)
		})
	}
}

// A watch bookmark reaches the reflector as the stored type with its resourceVersion and
// every annotation (the reflector drops an event of another type).
func TestBookmarkBecomesTheStoredType(t *testing.T) {
	for _, tc := range []struct {
		name      string
		obj       runtime.Object
		transform func(any) (any, error)
		want      runtime.Object
	}{
		{"workload", &appsv1.ReplicaSet{}, toRecord, &record{}},
		{"config metadata", &metav1.PartialObjectMetadata{}, toMetaRecord, &metaRecord{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := tc.obj.(metav1.Object)
			a.SetResourceVersion("42")
			a.SetAnnotations(map[string]string{"k8s.io/initial-events-end": "true"})
			e := bookmark(watch.Event{Type: watch.Bookmark, Object: tc.obj}, tc.transform)
			assert.IsType(t, tc.want, e.Object)
			m := e.Object.(metav1.Object)
			assert.Equal(t, "42", m.GetResourceVersion())
			assert.Equal(t, "true", m.GetAnnotations()["k8s.io/initial-events-end"])
		})
	}
}

// Anything but a workload or config metadata is left as Lean leaves it.
func TestRecordLeavesOtherValues(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	got, err := toRecord(cm)
	require.NoError(t, err)
	assert.Same(t, cm, got)
	got, err = toMetaRecord(cm)
	require.NoError(t, err)
	assert.Same(t, cm, got)
}
