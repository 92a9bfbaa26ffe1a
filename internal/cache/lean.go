package cache

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Lean is the informers' transform (docs/design.md, "The cache representation"): every
// workload is cached as the metadata the core, the sweep and status read (name, UID,
// resourceVersion, generation, creation and deletion time, ownerReferences, this
// project's annotations) and its pod template reduced to the references
// core.PodSpecRefs reads (core.RefsOnly) and this project's template annotations.
// The references are computed from the full template once, here; the core's
// ObjectRefs, the uses index and the sweep's Workload all read the reduced template and
// get the same answer as from the full one. No label is kept (nothing the service reads
// from its caches uses a workload's labels; status and the one-shot commands read
// live); ReplicaSets and Deployments also keep spec.replicas and status.readyReplicas.
// Anything else (config metadata included) loses only metadata.managedFields. Objects
// that are already lean pass through unchanged in content.
func Lean(obj any) (any, error) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		return leanReplicaSet(o), nil
	case *appsv1.Deployment:
		return leanDeployment(o), nil
	case *unstructured.Unstructured:
		if o.GetKind() == core.RolloutKind {
			return leanRollout(o), nil
		}
	case *corev1.Pod:
		return &corev1.Pod{ObjectMeta: leanMeta(o.ObjectMeta), Spec: core.RefsOnly(&o.Spec)}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: leanMeta(o.ObjectMeta), Spec: appsv1.StatefulSetSpec{Template: leanTemplate(&o.Spec.Template)}}, nil
	case *appsv1.DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: leanMeta(o.ObjectMeta), Spec: appsv1.DaemonSetSpec{Template: leanTemplate(&o.Spec.Template)}}, nil
	case *batchv1.Job:
		return &batchv1.Job{ObjectMeta: leanMeta(o.ObjectMeta), Spec: batchv1.JobSpec{Template: leanTemplate(&o.Spec.Template)}}, nil
	case *batchv1.CronJob:
		return &batchv1.CronJob{ObjectMeta: leanMeta(o.ObjectMeta), Spec: batchv1.CronJobSpec{
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: ownAnnotations(o.Spec.JobTemplate.Annotations)},
				Spec:       batchv1.JobSpec{Template: leanTemplate(&o.Spec.JobTemplate.Spec.Template)}}}}, nil
	case *appsv1.ControllerRevision:
		return leanRevision(o), nil
	}
	return StripManagedFields(obj)
}

func leanReplicaSet(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: leanMeta(rs.ObjectMeta),
		Spec:   appsv1.ReplicaSetSpec{Replicas: rs.Spec.Replicas, Template: leanTemplate(&rs.Spec.Template)},
		Status: appsv1.ReplicaSetStatus{ReadyReplicas: rs.Status.ReadyReplicas}}
}

func leanDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: leanMeta(d.ObjectMeta),
		Spec:   appsv1.DeploymentSpec{Replicas: d.Spec.Replicas, Template: leanTemplate(&d.Spec.Template)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: d.Status.ObservedGeneration, ReadyReplicas: d.Status.ReadyReplicas}}
}

// leanRollout keeps of an Argo Rollout its metadata (as leanMeta), spec.replicas,
// spec.workloadRef, spec.revisionHistoryLimit and spec.rollbackWindow (the core's
// RollbackWindowNote) and the lean spec.template. A template that does not decode as a
// pod template is kept whole (never lose a reference).
func leanRollout(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	out.SetAPIVersion(u.GetAPIVersion())
	out.SetKind(u.GetKind())
	m := leanMeta(metav1.ObjectMeta{Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
		ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration(), CreationTimestamp: u.GetCreationTimestamp(),
		DeletionTimestamp: u.GetDeletionTimestamp(), OwnerReferences: u.GetOwnerReferences(), Annotations: u.GetAnnotations()})
	out.SetName(m.Name)
	out.SetNamespace(m.Namespace)
	out.SetUID(m.UID)
	out.SetResourceVersion(m.ResourceVersion)
	out.SetGeneration(m.Generation)
	out.SetCreationTimestamp(m.CreationTimestamp)
	out.SetDeletionTimestamp(m.DeletionTimestamp)
	out.SetOwnerReferences(m.OwnerReferences)
	out.SetAnnotations(m.Annotations)
	spec := map[string]any{}
	src, _, _ := unstructured.NestedMap(u.Object, "spec")
	for _, k := range []string{"replicas", "workloadRef", "revisionHistoryLimit", "rollbackWindow"} {
		if v, ok := src[k]; ok {
			spec[k] = v
		}
	}
	if raw, ok := src["template"].(map[string]any); ok {
		spec["template"] = leanUnstructuredTemplate(raw)
	}
	out.Object["spec"] = spec
	return out
}

func leanUnstructuredTemplate(raw map[string]any) any {
	var t corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &t); err != nil {
		return raw
	}
	lean := leanTemplate(&t)
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&lean)
	if err != nil {
		return raw
	}
	return m
}

func leanMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Generation: m.Generation, CreationTimestamp: m.CreationTimestamp, DeletionTimestamp: m.DeletionTimestamp,
		OwnerReferences: m.OwnerReferences, Annotations: ownAnnotations(m.Annotations)}
}

func leanTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: ownAnnotations(t.Annotations)}, Spec: core.RefsOnly(&t.Spec)}
}

// leanRevision keeps a StatefulSet's or DaemonSet's ControllerRevision with data that
// holds only the lean template; others keep no data (nothing reads it).
func leanRevision(cr *appsv1.ControllerRevision) *appsv1.ControllerRevision {
	out := &appsv1.ControllerRevision{ObjectMeta: leanMeta(cr.ObjectMeta), Revision: cr.Revision}
	if t, err := core.RevisionTemplate(cr); err == nil && t != nil {
		lean := leanTemplate(t)
		if raw, err := core.EncodeRevisionTemplate(&lean); err == nil {
			out.Data.Raw = raw
		}
	}
	return out
}

// ownAnnotations keeps the annotations with this project's prefix.
func ownAnnotations(ann map[string]string) map[string]string {
	var out map[string]string
	for k, v := range ann {
		if strings.HasPrefix(k, core.Prefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// leanConfigMeta is the config metadata informers' transform: a revision keeps every
// label (selectors match on them) and only this project's annotations (a kubectl
// last-applied-configuration annotation holds the whole object, data included).
func leanConfigMeta(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return StripManagedFields(obj)
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: m.ObjectMeta}
	out.ManagedFields = nil
	out.Annotations = ownAnnotations(m.Annotations)
	return out, nil
}
