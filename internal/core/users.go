package core

import (
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Users are the objects of one namespace that use one config object, as a Reader finds
// them (Reader.Users): every object whose pod template or pod spec references it, or
// whose annotations (or its template's) list it. Objects being deleted may be among
// them; Owners leaves them out.
type Users struct {
	// ReplicaSets that use it, and the live ReplicaSets of a Deployment or Rollout
	// whose annotations list it.
	ReplicaSets []*appsv1.ReplicaSet
	// ControllerRevisions of StatefulSets and DaemonSets whose saved template uses it.
	ControllerRevisions []*appsv1.ControllerRevision
	StatefulSets        []*appsv1.StatefulSet
	DaemonSets          []*appsv1.DaemonSet
	Jobs                []*batchv1.Job
	CronJobs            []*batchv1.CronJob
	Pods                []*corev1.Pod
	// Deployments and Rollouts whose own annotations list it (their ReplicaSets are in
	// ReplicaSets). Their listing is a trusted opt-in.
	Deployments []*appsv1.Deployment
	Rollouts    []*unstructured.Unstructured
}

// User is an object that keeps a config object while it exists, by owning it.
type User struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
	// Via names the workload a ControllerRevision belongs to ("StatefulSet/db").
	Via string `json:"via,omitempty"`
}

// String is "Kind/name", with " (Via)" for a ControllerRevision.
func (u User) String() string {
	if u.Via != "" {
		return u.Kind + "/" + u.Name + " (" + u.Via + ")"
	}
	return u.Kind + "/" + u.Name
}

// OwnerReference returns u as a non-controller owner.
func (u User) OwnerReference() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: u.APIVersion, Kind: u.Kind, Name: u.Name, UID: u.UID, Controller: ptrTo(false)}
}

// Owners returns the objects that must own the config object so that the garbage
// collector keeps it while any user lives (docs/safety.md, "Every user protects a
// revision"). Objects being deleted are left out (safety rule 2).
//
//   - a ReplicaSet, a Job, a CronJob: the object itself;
//   - a StatefulSet or DaemonSet: the ControllerRevision of each template that uses it
//     (the controller keeps it while Pods of that template live), or the workload
//     itself while its controller has not written such a ControllerRevision yet;
//   - a Pod: covered by its controller when that is one of the owners above (or the
//     workload of one of the ControllerRevisions), else the Pod itself (a bare Pod, a
//     Pod of another kind of controller, a Pod whose spec differs from its template).
func (u *Users) Owners() []User {
	var out []User
	seen := map[types.UID]bool{}
	add := func(usr User) {
		if !seen[usr.UID] {
			seen[usr.UID] = true
			out = append(out, usr)
		}
	}
	covered := map[types.UID]bool{} // workloads whose Pods are covered
	for _, rs := range u.ReplicaSets {
		if rs.DeletionTimestamp == nil {
			add(User{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID})
			covered[rs.UID] = true
		}
	}
	for _, cr := range u.ControllerRevisions {
		ctrl := revisionController(cr)
		if cr.DeletionTimestamp == nil && ctrl != nil {
			add(User{APIVersion: "apps/v1", Kind: "ControllerRevision", Name: cr.Name, UID: cr.UID, Via: ctrl.Kind + "/" + ctrl.Name})
			covered[ctrl.UID] = true
		}
	}
	for _, w := range u.templateWorkloads() {
		if w.DeletionTimestamp == nil && !covered[w.UID] {
			add(User{APIVersion: "apps/v1", Kind: w.kind, Name: w.Name, UID: w.UID})
			covered[w.UID] = true
		}
	}
	for _, j := range u.Jobs {
		if j.DeletionTimestamp == nil {
			add(User{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID})
			covered[j.UID] = true
		}
	}
	for _, c := range u.CronJobs {
		if c.DeletionTimestamp == nil {
			add(User{APIVersion: "batch/v1", Kind: "CronJob", Name: c.Name, UID: c.UID})
		}
	}
	for _, p := range u.Pods {
		if c := metav1.GetControllerOf(p); p.DeletionTimestamp == nil && (c == nil || !covered[c.UID]) {
			add(User{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID})
		}
	}
	return out
}

type templateWorkload struct {
	metav1.ObjectMeta
	kind string
}

func (u *Users) templateWorkloads() []templateWorkload {
	var out []templateWorkload
	for _, s := range u.StatefulSets {
		out = append(out, templateWorkload{s.ObjectMeta, "StatefulSet"})
	}
	for _, d := range u.DaemonSets {
		out = append(out, templateWorkload{d.ObjectMeta, "DaemonSet"})
	}
	return out
}

// ListedBy reports whether an annotation of a user (or of its pod template) lists the
// config object kind/name: a trusted opt-in, written by someone with rights on the
// workload.
func (u *Users) ListedBy(kind Kind, name string) bool {
	if len(u.Deployments) > 0 || len(u.Rollouts) > 0 {
		return true // they are users only because their annotations list it
	}
	for _, o := range u.objects() {
		for _, r := range ObjectRefs(o) {
			if r.Explicit && r.Kind == kind && r.Name == name {
				return true
			}
		}
	}
	return false
}

// Add appends obj to the list of its kind; other kinds are ignored. Readers build
// their answer with it.
func (u *Users) Add(obj any) {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		u.ReplicaSets = append(u.ReplicaSets, o)
	case *appsv1.ControllerRevision:
		u.ControllerRevisions = append(u.ControllerRevisions, o)
	case *appsv1.StatefulSet:
		u.StatefulSets = append(u.StatefulSets, o)
	case *appsv1.DaemonSet:
		u.DaemonSets = append(u.DaemonSets, o)
	case *batchv1.Job:
		u.Jobs = append(u.Jobs, o)
	case *batchv1.CronJob:
		u.CronJobs = append(u.CronJobs, o)
	case *corev1.Pod:
		u.Pods = append(u.Pods, o)
	case *appsv1.Deployment:
		u.Deployments = append(u.Deployments, o)
	case *unstructured.Unstructured:
		u.Rollouts = append(u.Rollouts, o)
	}
}

// of returns the users of the config object kind/name among u, which holds every
// object of one namespace: those that use it (Uses), plus the live ReplicaSets of the
// Deployments and Rollouts whose annotations list it, and of the Rollouts whose
// spec.workloadRef names such a Deployment.
func (u *Users) of(kind Kind, name string) *Users {
	out := &Users{}
	uses := func(o any) bool { return Uses(o, kind, name) }
	for _, o := range appendAny(appendAny(u.objects(), u.Deployments), u.Rollouts) {
		if uses(o) {
			out.Add(o)
		}
	}
	workloads := WorkloadUIDs(out.Deployments, out.Rollouts, u.Rollouts)
	for _, rs := range u.ReplicaSets {
		if c := metav1.GetControllerOf(rs); c != nil && workloads[c.UID] && !uses(rs) {
			out.Add(rs)
		}
	}
	return out
}

// WorkloadUIDs returns the UIDs of the workloads whose ReplicaSets a workload
// annotation's listing covers: the listed Deployments and Rollouts, and the Rollouts
// among rollouts whose spec.workloadRef names one of the listed Deployments.
func WorkloadUIDs(listedDeployments []*appsv1.Deployment, listedRollouts, rollouts []*unstructured.Unstructured) map[types.UID]bool {
	out := map[types.UID]bool{}
	names := map[string]bool{}
	for _, d := range listedDeployments {
		out[d.UID], names[d.Name] = true, true
	}
	for _, ro := range listedRollouts {
		out[ro.GetUID()] = true
	}
	for _, ro := range rollouts {
		if kind, name := RolloutWorkloadRef(ro); kind == "Deployment" && names[name] {
			out[ro.GetUID()] = true
		}
	}
	return out
}

// RolloutWorkloadRef returns the kind and name of a Rollout's spec.workloadRef.
func RolloutWorkloadRef(ro *unstructured.Unstructured) (kind, name string) {
	kind, _, _ = unstructured.NestedString(ro.Object, "spec", "workloadRef", "kind")
	name, _, _ = unstructured.NestedString(ro.Object, "spec", "workloadRef", "name")
	return kind, name
}

// objects returns every user object but the Deployments and Rollouts.
func (u *Users) objects() []any {
	var out []any
	out = appendAny(out, u.ReplicaSets)
	out = appendAny(out, u.ControllerRevisions)
	out = appendAny(out, u.StatefulSets)
	out = appendAny(out, u.DaemonSets)
	out = appendAny(out, u.Jobs)
	out = appendAny(out, u.CronJobs)
	return appendAny(out, u.Pods)
}

func appendAny[T any](out []any, items []T) []any {
	for _, i := range items {
		out = append(out, i)
	}
	return out
}

// revisionController returns the StatefulSet or DaemonSet (apps group) controlling cr,
// or nil: ControllerRevisions of other controllers hold data this package does not read.
func revisionController(cr *appsv1.ControllerRevision) *metav1.OwnerReference {
	c := metav1.GetControllerOf(cr)
	if c == nil || !strings.HasPrefix(c.APIVersion, "apps/") || (c.Kind != "StatefulSet" && c.Kind != "DaemonSet") {
		return nil
	}
	return c
}

// revisionData is the part of a StatefulSet's or DaemonSet's ControllerRevision data this
// package reads: the saved pod template (the controllers store a strategic merge patch
// {"spec":{"template":{...,"$patch":"replace"}}}).
type revisionData struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// RevisionTemplate decodes the pod template a StatefulSet's or DaemonSet's
// ControllerRevision saved. It returns nil for a ControllerRevision of another
// controller.
func RevisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	if revisionController(cr) == nil {
		return nil, nil
	}
	raw := cr.Data.Raw
	if raw == nil && cr.Data.Object != nil {
		var err error
		if raw, err = json.Marshal(cr.Data.Object); err != nil {
			return nil, err
		}
	}
	var d revisionData
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("decoding ControllerRevision %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	return &d.Spec.Template, nil
}

// EncodeRevisionTemplate is the inverse of RevisionTemplate: ControllerRevision data
// holding only tmpl (what a lean cache keeps).
func EncodeRevisionTemplate(tmpl *corev1.PodTemplateSpec) ([]byte, error) {
	var d revisionData
	d.Spec.Template = *tmpl
	return json.Marshal(d)
}

// ObjectRefs returns the config objects obj uses: its pod template's or pod spec's
// references (PodSpecRefs) and the names its annotations and its template's list
// (Ref.Explicit). obj is one of the kinds Users holds, or a Deployment or Rollout (only
// their own annotations count: their templates are their ReplicaSets'). A
// ControllerRevision that does not decode has none.
func ObjectRefs(obj any) []Ref {
	s := newRefSet()
	var meta metav1.Object
	var tmpl *corev1.PodTemplateSpec
	var spec *corev1.PodSpec
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		meta, tmpl = o, &o.Spec.Template
	case *appsv1.StatefulSet:
		meta, tmpl = o, &o.Spec.Template
	case *appsv1.DaemonSet:
		meta, tmpl = o, &o.Spec.Template
	case *batchv1.Job:
		meta, tmpl = o, &o.Spec.Template
	case *batchv1.CronJob:
		meta, tmpl = o, &o.Spec.JobTemplate.Spec.Template
	case *corev1.Pod:
		meta, spec = o, &o.Spec
	case *appsv1.ControllerRevision:
		t, err := RevisionTemplate(o)
		if err != nil || t == nil {
			return nil
		}
		tmpl = t // the revision's own annotations are the controller's, not the user's
	case *appsv1.Deployment:
		meta = o
	case *unstructured.Unstructured:
		meta = o
	default:
		return nil
	}
	var anns []map[string]string
	if meta != nil {
		anns = append(anns, meta.GetAnnotations())
	}
	if tmpl != nil {
		anns = append(anns, tmpl.Annotations)
		spec = &tmpl.Spec
	}
	addAnnotationRefs(s, anns)
	addPodSpecRefs(s, spec)
	return s.list()
}

// UsesKey is the key of a config object in a uses index: "Kind/namespace/name".
func UsesKey(kind Kind, namespace, name string) string {
	return string(kind) + "/" + namespace + "/" + name
}

// SplitUsesKey is UsesKey's inverse: ok is false for a key it did not make.
func SplitUsesKey(key string) (kind Kind, namespace, name string, ok bool) {
	k, rest, ok1 := strings.Cut(key, "/")
	namespace, name, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || k == "" || name == "" {
		return "", "", "", false
	}
	return Kind(k), namespace, name, true
}

// UsesKeys returns the UsesKey of every config object obj uses (ObjectRefs): the index
// function of a uses index.
func UsesKeys(obj any) []string {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	refs := ObjectRefs(obj)
	keys := make([]string, 0, len(refs))
	for _, r := range refs {
		keys = append(keys, UsesKey(r.Kind, m.GetNamespace(), r.Name))
	}
	return keys
}

// Uses reports whether obj uses the config object kind/name (ObjectRefs).
func Uses(obj any, kind Kind, name string) bool {
	for _, r := range ObjectRefs(obj) {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// ListedKeys returns the UsesKey of every config object obj's annotations (or its pod
// template's) list by name (Ref.Explicit): the names that make an unlabelled object a
// revision. The revision side's candidate check uses an index on them.
func ListedKeys(obj any) []string {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil
	}
	var keys []string
	for _, r := range ObjectRefs(obj) {
		if r.Explicit {
			keys = append(keys, UsesKey(r.Kind, m.GetNamespace(), r.Name))
		}
	}
	return keys
}
