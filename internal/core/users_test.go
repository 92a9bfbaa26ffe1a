package core_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

func om(name string, uid types.UID, controller *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, UID: uid}
	if controller != nil {
		m.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	return m
}

func ctrl(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: ptr(true)}
}

func deleting(m metav1.ObjectMeta) metav1.ObjectMeta {
	m.DeletionTimestamp = &metav1.Time{}
	return m
}

// The owner rule (docs/safety.md): each user is protected through the object that
// carries its history, Pods through their controller when it is an owner.
func TestUsersOwners(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: om("db", "sts", nil)}
	cases := []struct {
		name  string
		users core.Users
		want  []string
	}{
		{"a StatefulSet through its ControllerRevision, its Pod covered", core.Users{
			StatefulSets:        []*appsv1.StatefulSet{sts},
			ControllerRevisions: []*appsv1.ControllerRevision{{ObjectMeta: om("db-1", "cr", ctrl("apps/v1", "StatefulSet", "db", "sts"))}},
			Pods:                []*corev1.Pod{{ObjectMeta: om("db-0", "p", ctrl("apps/v1", "StatefulSet", "db", "sts"))}},
		}, []string{"ControllerRevision/db-1 (StatefulSet/db)"}},
		{"a StatefulSet whose ControllerRevision is not written yet: itself", core.Users{
			StatefulSets: []*appsv1.StatefulSet{sts},
		}, []string{"StatefulSet/db"}},
		{"an old ControllerRevision of a StatefulSet that moved on", core.Users{
			ControllerRevisions: []*appsv1.ControllerRevision{{ObjectMeta: om("db-1", "cr", ctrl("apps/v1", "StatefulSet", "db", "sts"))}},
		}, []string{"ControllerRevision/db-1 (StatefulSet/db)"}},
		{"a ControllerRevision of another controller is not read", core.Users{
			ControllerRevisions: []*appsv1.ControllerRevision{{ObjectMeta: om("vm-1", "cr", ctrl("kubevirt.io/v1", "VirtualMachine", "vm", "vm"))}},
		}, nil},
		{"a Job covers its Pods; a CronJob is itself", core.Users{
			Jobs:     []*batchv1.Job{{ObjectMeta: om("migrate", "job", nil)}},
			CronJobs: []*batchv1.CronJob{{ObjectMeta: om("nightly", "cj", nil)}},
			Pods:     []*corev1.Pod{{ObjectMeta: om("migrate-x", "p", ctrl("batch/v1", "Job", "migrate", "job"))}},
		}, []string{"Job/migrate", "CronJob/nightly"}},
		{"a Pod whose controller does not use it is itself (a mutated spec)", core.Users{
			Pods: []*corev1.Pod{{ObjectMeta: om("web-x", "p", ctrl("apps/v1", "ReplicaSet", "web-1", "rs"))}},
		}, []string{"Pod/web-x"}},
		{"a bare Pod is itself", core.Users{
			Pods: []*corev1.Pod{{ObjectMeta: om("debug", "p", nil)}},
		}, []string{"Pod/debug"}},
		{"objects being deleted are left out (rule 2)", core.Users{
			ReplicaSets: []*appsv1.ReplicaSet{{ObjectMeta: deleting(om("web-1", "rs", nil))}},
			Jobs:        []*batchv1.Job{{ObjectMeta: deleting(om("migrate", "job", nil))}},
			Pods:        []*corev1.Pod{{ObjectMeta: deleting(om("debug", "p", nil))}},
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range tc.users.Owners() {
				got = append(got, o.String())
				ref := o.OwnerReference()
				assert.False(t, *ref.Controller)
				assert.Nil(t, ref.BlockOwnerDeletion)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestListedKeysAreOnlyNamesAnAnnotationLists(t *testing.T) {
	rs := func(ann, tmplAnn map[string]string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Annotations: ann},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: tmplAnn},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "mounted"}}}}}}}}}
	}
	cases := []struct {
		name string
		obj  any
		want []string
	}{
		{"a template reference alone is no listing", rs(nil, nil), nil},
		{"the ReplicaSet's annotation", rs(map[string]string{core.AnnotationConfigMaps: "a, b"}, nil), []string{"ConfigMap/ns/a", "ConfigMap/ns/b"}},
		{"the pod template's annotation, Secrets too", rs(nil, map[string]string{core.AnnotationSecrets: "s"}), []string{"Secret/ns/s"}},
		{"a Deployment's annotation", &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d",
			Annotations: map[string]string{core.AnnotationConfigMaps: "c"}}}, []string{"ConfigMap/ns/c"}},
		{"not an object", "x", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ElementsMatch(t, tc.want, core.ListedKeys(tc.obj))
		})
	}
}
