package cache

import (
	"context"
	"encoding/json"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

func ptr[T any](v T) *T { return &v }

// template mounts cfg and carries what a real pod template has besides (image, command,
// resources, labels, foreign annotations), which the lean cache must drop.
func template(cfg string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"checksum/config": "abc"}},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: cfg}, Items: []corev1.KeyToPath{{Key: "a", Path: "a"}}}}},
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "app", Image: "app:1", Command: []string{"/app", "--serve"},
				Env: []corev1.EnvVar{{Name: "PLAIN", Value: "x"}}}},
		},
	}
}

func objMeta(name string, uid types.UID, owner *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: "shop", UID: uid, Labels: map[string]string{"app": "x"},
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return m
}

func controller(kind, name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr(true)}
}

// revisionOf builds a ControllerRevision as the StatefulSet controller writes it.
func revisionOf(t *testing.T, sts *appsv1.StatefulSet) *appsv1.ControllerRevision {
	tmpl, err := json.Marshal(sts.Spec.Template)
	require.NoError(t, err)
	var tm map[string]any
	require.NoError(t, json.Unmarshal(tmpl, &tm))
	tm["$patch"] = "replace"
	data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tm}})
	require.NoError(t, err)
	cr := &appsv1.ControllerRevision{ObjectMeta: objMeta(sts.Name+"-5d8f", "cr-1", controller("StatefulSet", sts.Name, sts.UID)), Revision: 1}
	cr.Data.Raw = data
	return cr
}

// The uses index answers as the live lists do, for every kind, and the cached users
// keep only what it reads.
func TestUsersIndexMatchesLiveLists(t *testing.T) {
	sts := &appsv1.StatefulSet{ObjectMeta: objMeta("db", "sts-1", nil), Spec: appsv1.StatefulSetSpec{Template: template("cfg")}}
	dep := &appsv1.Deployment{ObjectMeta: objMeta("web", "dep-1", nil), Spec: appsv1.DeploymentSpec{Template: template("other")}}
	dep.Annotations = map[string]string{core.AnnotationConfigMaps: "cfg"}
	cj := &batchv1.CronJob{ObjectMeta: objMeta("nightly", "cj-1", nil)}
	cj.Spec.JobTemplate.Spec.Template = template("cfg")
	objs := []runtime.Object{
		&appsv1.ReplicaSet{ObjectMeta: objMeta("api-1", "rs-1", nil), Spec: appsv1.ReplicaSetSpec{Template: template("cfg")}},
		&appsv1.ReplicaSet{ObjectMeta: objMeta("web-1", "rs-2", controller("Deployment", "web", "dep-1")), Spec: appsv1.ReplicaSetSpec{Template: template("other")}},
		&appsv1.ReplicaSet{ObjectMeta: objMeta("unrelated", "rs-3", nil), Spec: appsv1.ReplicaSetSpec{Template: template("other")}},
		sts, revisionOf(t, sts), dep, cj,
		&appsv1.DaemonSet{ObjectMeta: objMeta("agent", "ds-1", nil), Spec: appsv1.DaemonSetSpec{Template: template("cfg")}},
		&batchv1.Job{ObjectMeta: objMeta("migrate", "job-1", nil), Spec: batchv1.JobSpec{Template: template("cfg")}},
		&corev1.Pod{ObjectMeta: objMeta("debug", "pod-1", nil), Spec: template("cfg").Spec},
		&corev1.Pod{ObjectMeta: objMeta("db-0", "pod-2", controller("StatefulSet", "db", "sts-1")), Spec: template("cfg").Spec},
	}
	ctx := context.Background()
	c, _ := runFakeCache(t, Options{}, objs...)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	// The user informers start with the first Users, answered live until they have synced
	// (lazyUsers).
	_, err := c.Users(ctx, core.KindConfigMap, "shop", "cfg")
	require.NoError(t, err)
	require.True(t, c.awaitUsers(wctx), "user informers synced")
	misses := c.Misses("users")

	cached, err := c.Users(ctx, core.KindConfigMap, "shop", "cfg")
	require.NoError(t, err)
	assert.Equal(t, misses, c.Misses("users"), "answered from the index")
	live, err := core.LiveReader{Client: c.clients.Kube, Dynamic: c.clients.Dynamic, Metadata: c.clients.Metadata}.Users(ctx, core.KindConfigMap, "shop", "cfg")
	require.NoError(t, err)
	want := []string{"ControllerRevision/db-5d8f (StatefulSet/db)", "CronJob/nightly", "DaemonSet/agent", "Job/migrate",
		"Pod/debug", "ReplicaSet/api-1", "ReplicaSet/web-1"}
	assert.Equal(t, want, ownerNames(cached), "db-0 is covered by its ControllerRevision, web-1 is listed by its Deployment")
	assert.Equal(t, want, ownerNames(live))
	assert.True(t, cached.ListedBy(core.KindConfigMap, "cfg"), "the Deployment's annotation lists it")

	t.Run("lean", func(t *testing.T) {
		for _, inf := range c.userInfs {
			for _, stored := range inf.GetStore().List() {
				obj, err := Decode(stored)
				require.NoError(t, err)
				m := obj.(metav1.Object)
				assert.Empty(t, m.GetManagedFields(), m.GetName())
				assert.Empty(t, m.GetLabels(), m.GetName())
				assert.NotContains(t, m.GetAnnotations(), "kubectl.kubernetes.io/last-applied-configuration", m.GetName())
				assert.Equal(t, []string{"ConfigMap/cfg"}, refNames(core.ObjectRefs(obj)), "%s keeps its reference", m.GetName())
				if p, ok := obj.(*corev1.Pod); ok {
					assert.Empty(t, p.Spec.Containers, "no container keeps anything: no image, command or plain env")
					assert.Len(t, p.Spec.Volumes, 1, "only the config volume")
				}
			}
		}
	})
}

func ownerNames(u *core.Users) []string {
	var out []string
	for _, o := range u.Owners() {
		out = append(out, o.String())
	}
	sort.Strings(out)
	return out
}

func refNames(refs []core.Ref) []string {
	var out []string
	for _, r := range refs {
		out = append(out, string(r.Kind)+"/"+r.Name)
	}
	return out
}
