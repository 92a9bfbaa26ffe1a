package gc

import (
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Snapshot is what the planner knows of one namespace. It is built by a Source (or by
// hand in tests) and never mutated by the planner.
type Snapshot struct {
	// Namespace is the namespace every object below lives in.
	Namespace string `json:"namespace"`
	// Revisions are the candidate ConfigMaps/Secrets (metadata only).
	Revisions []Revision `json:"revisions"`
	// Workloads are every object with a pod template or pod spec in the namespace, of
	// the kinds in Listed.
	Workloads []Workload `json:"workloads"`
	// Listed holds the group/kinds whose objects in the namespace were all listed: an
	// owner of such a kind is live exactly when its UID is in Live. Owners of other
	// kinds count as live (never delete on doubt).
	Listed map[schema.GroupKind]bool `json:"-"`
	// Live is the set of UIDs of the listed objects (workloads included).
	Live map[types.UID]bool `json:"-"`
}

// Revision is the metadata of one ConfigMap or Secret.
type Revision struct {
	Kind            core.Kind               `json:"kind"`
	Name            string                  `json:"name"`
	UID             types.UID               `json:"uid"`
	ResourceVersion string                  `json:"resourceVersion"`
	Created         time.Time               `json:"created"`
	Deleting        bool                    `json:"deleting,omitempty"`
	Labels          map[string]string       `json:"labels,omitempty"`
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
}

// RevisionFromMeta converts object metadata (from a metadata-only list) to a Revision.
func RevisionFromMeta(kind core.Kind, m *metav1.ObjectMeta) Revision {
	return Revision{Kind: kind, Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		Created: m.CreationTimestamp.Time, Deleting: m.DeletionTimestamp != nil,
		Labels: m.Labels, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences}
}

// Workload is one object that has a pod template or a pod spec.
type Workload struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	Created    time.Time `json:"created"`
	Deleting   bool      `json:"deleting,omitempty"`
	// Annotations are the object's annotations (skip, listed names).
	Annotations     map[string]string       `json:"annotations,omitempty"`
	OwnerReferences []metav1.OwnerReference `json:"ownerReferences,omitempty"`
	// Refs are the ConfigMaps/Secrets its pod template or pod spec references, plus the
	// names its own and its template's configmap-attacher.io/configmaps and /secrets
	// annotations list (Ref.Explicit).
	Refs []core.Ref `json:"refs,omitempty"`
	// WorkloadRef is a Rollout's spec.workloadRef, if any.
	WorkloadRef *TargetRef `json:"workloadRef,omitempty"`
	// Skip is true when the object or its pod template has configmap-attacher.io/skip=true.
	Skip bool `json:"skip,omitempty"`

	// ReplicaSet details, for status: the deployment.kubernetes.io/revision annotation
	// (Rollouts use rollout.argoproj.io/revision), the pod-template-hash (or
	// rollouts-pod-template-hash) label, desired and ready replicas.
	Revision      string `json:"revision,omitempty"`
	PodHash       string `json:"podHash,omitempty"`
	Replicas      int32  `json:"replicas,omitempty"`
	ReadyReplicas int32  `json:"readyReplicas,omitempty"`
}

// TargetRef names an object in the same namespace by API version, kind and name.
type TargetRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
}

// GroupKind returns the group/kind of r.
func (r TargetRef) GroupKind() schema.GroupKind { return groupKind(r.APIVersion, r.Kind) }

// GroupKind returns the group/kind of w.
func (w *Workload) GroupKind() schema.GroupKind { return groupKind(w.APIVersion, w.Kind) }

// String is "Kind/name".
func (w *Workload) String() string { return w.Kind + "/" + w.Name }

func groupKind(apiVersion, kind string) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupKind{Group: "?" + apiVersion, Kind: kind}
	}
	return schema.GroupKind{Group: gv.Group, Kind: kind}
}

// Group/kinds of the workloads a LiveSource lists.
var (
	GKReplicaSet  = schema.GroupKind{Group: "apps", Kind: "ReplicaSet"}
	GKDeployment  = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	GKStatefulSet = schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	GKDaemonSet   = schema.GroupKind{Group: "apps", Kind: "DaemonSet"}
	GKJob         = schema.GroupKind{Group: "batch", Kind: "Job"}
	GKCronJob     = schema.GroupKind{Group: "batch", Kind: "CronJob"}
	GKPod         = schema.GroupKind{Group: "", Kind: "Pod"}
	GKRollout     = schema.GroupKind{Group: core.RolloutGroup, Kind: core.RolloutKind}
	// GKControllerRevision: a StatefulSet's or DaemonSet's template history, which
	// `kubectl rollout undo` brings back as old ReplicaSets do a Deployment's.
	GKControllerRevision = schema.GroupKind{Group: "apps", Kind: "ControllerRevision"}
)

// WorkloadKinds are the group/kinds a complete Snapshot lists (docs/design.md, safety rule 7).
var WorkloadKinds = []schema.GroupKind{GKReplicaSet, GKDeployment, GKRollout, GKStatefulSet, GKDaemonSet, GKJob, GKCronJob, GKPod,
	GKControllerRevision}

func newWorkload(apiVersion, kind string, m *metav1.ObjectMeta, tmplAnn map[string]string, spec *corev1.PodSpec) Workload {
	w := Workload{APIVersion: apiVersion, Kind: kind, Name: m.Name, UID: m.UID, Created: m.CreationTimestamp.Time,
		Deleting: m.DeletionTimestamp != nil, Annotations: m.Annotations, OwnerReferences: m.OwnerReferences}
	w.Skip = m.Annotations[core.AnnotationSkip] == "true" || tmplAnn[core.AnnotationSkip] == "true"
	var refs []core.Ref
	if spec != nil {
		refs = core.PodSpecRefs(spec)
	}
	refs = append(refs, annotationRefs(m.Annotations)...)
	refs = append(refs, annotationRefs(tmplAnn)...)
	w.Refs = refs
	return w
}

// annotationRefs returns the names the configmap-attacher.io/configmaps and /secrets
// annotations list. Entries that are not valid names are dropped: no object can have
// such a name.
func annotationRefs(ann map[string]string) []core.Ref {
	var out []core.Ref
	for _, p := range []struct {
		key  string
		kind core.Kind
	}{{core.AnnotationConfigMaps, core.KindConfigMap}, {core.AnnotationSecrets, core.KindSecret}} {
		for _, raw := range strings.Split(ann[p.key], ",") {
			name := strings.TrimSpace(raw)
			if name == "" || core.ValidateName(name) != nil {
				continue
			}
			out = append(out, core.Ref{Kind: p.kind, Name: name, Explicit: true, From: []string{"annotation"}})
		}
	}
	return out
}

// FromReplicaSet converts a ReplicaSet.
func FromReplicaSet(rs *appsv1.ReplicaSet) Workload {
	w := newWorkload("apps/v1", "ReplicaSet", &rs.ObjectMeta, rs.Spec.Template.Annotations, &rs.Spec.Template.Spec)
	w.Revision = rs.Annotations[core.DeploymentRevisionAnnotation]
	if w.Revision == "" {
		w.Revision = rs.Annotations["rollout.argoproj.io/revision"]
	}
	w.PodHash = rs.Labels[core.DeploymentHashKey]
	if w.PodHash == "" {
		w.PodHash = rs.Labels[core.RolloutHashLabel]
	}
	if rs.Spec.Replicas != nil {
		w.Replicas = *rs.Spec.Replicas
	} else {
		w.Replicas = 1
	}
	w.ReadyReplicas = rs.Status.ReadyReplicas
	return w
}

// FromDeployment converts a Deployment.
func FromDeployment(d *appsv1.Deployment) Workload {
	w := newWorkload("apps/v1", "Deployment", &d.ObjectMeta, d.Spec.Template.Annotations, &d.Spec.Template.Spec)
	w.Revision = d.Annotations[core.DeploymentRevisionAnnotation]
	if d.Spec.Replicas != nil {
		w.Replicas = *d.Spec.Replicas
	}
	w.ReadyReplicas = d.Status.ReadyReplicas
	return w
}

// FromStatefulSet converts a StatefulSet.
func FromStatefulSet(s *appsv1.StatefulSet) Workload {
	return newWorkload("apps/v1", "StatefulSet", &s.ObjectMeta, s.Spec.Template.Annotations, &s.Spec.Template.Spec)
}

// FromDaemonSet converts a DaemonSet.
func FromDaemonSet(d *appsv1.DaemonSet) Workload {
	return newWorkload("apps/v1", "DaemonSet", &d.ObjectMeta, d.Spec.Template.Annotations, &d.Spec.Template.Spec)
}

// FromJob converts a Job.
func FromJob(j *batchv1.Job) Workload {
	return newWorkload("batch/v1", "Job", &j.ObjectMeta, j.Spec.Template.Annotations, &j.Spec.Template.Spec)
}

// FromCronJob converts a CronJob: its spec.jobTemplate.spec.template is the pod template.
func FromCronJob(c *batchv1.CronJob) Workload {
	t := &c.Spec.JobTemplate.Spec.Template
	w := newWorkload("batch/v1", "CronJob", &c.ObjectMeta, t.Annotations, &t.Spec)
	w.Refs = append(w.Refs, annotationRefs(c.Spec.JobTemplate.Annotations)...)
	return w
}

// FromControllerRevision converts a ControllerRevision: the pod template its data holds
// (a StatefulSet's or DaemonSet's earlier template, core.RevisionTemplate) is what it
// references. Its own annotations are its controller's, not the user's, and count for
// nothing; data that holds no pod template references nothing.
func FromControllerRevision(cr *appsv1.ControllerRevision) Workload {
	m := metav1.ObjectMeta{Name: cr.Name, UID: cr.UID, CreationTimestamp: cr.CreationTimestamp,
		DeletionTimestamp: cr.DeletionTimestamp, OwnerReferences: cr.OwnerReferences}
	t, err := core.RevisionTemplate(cr)
	if err != nil || t == nil {
		return newWorkload("apps/v1", "ControllerRevision", &m, nil, nil)
	}
	return newWorkload("apps/v1", "ControllerRevision", &m, t.Annotations, &t.Spec)
}

// FromPod converts a Pod (its spec, ephemeral containers included).
func FromPod(p *corev1.Pod) Workload {
	return newWorkload("v1", "Pod", &p.ObjectMeta, nil, &p.Spec)
}

// FromRollout converts an Argo Rollout (argoproj.io/v1alpha1) read as unstructured
// data. Its spec.template is decoded as a core/v1 PodTemplateSpec; spec.workloadRef,
// when set, becomes WorkloadRef (the named Deployment is listed on its own).
func FromRollout(u *unstructured.Unstructured) (Workload, error) {
	var tmpl corev1.PodTemplateSpec
	if raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "template"); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
			return Workload{}, err
		}
	}
	m := metav1.ObjectMeta{Name: u.GetName(), UID: u.GetUID(), CreationTimestamp: u.GetCreationTimestamp(),
		DeletionTimestamp: u.GetDeletionTimestamp(), Annotations: u.GetAnnotations(), OwnerReferences: u.GetOwnerReferences()}
	w := newWorkload(u.GetAPIVersion(), core.RolloutKind, &m, tmpl.Annotations, &tmpl.Spec)
	if ref, ok, _ := unstructured.NestedMap(u.Object, "spec", "workloadRef"); ok {
		t := &TargetRef{}
		t.APIVersion, _, _ = unstructured.NestedString(ref, "apiVersion")
		t.Kind, _, _ = unstructured.NestedString(ref, "kind")
		t.Name, _, _ = unstructured.NestedString(ref, "name")
		w.WorkloadRef = t
	}
	if r, ok, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); ok {
		w.Replicas = int32(r)
	}
	return w, nil
}
