// Package argorollouts reads and drives Argo Rollouts objects the way the
// kubectl-argo-rollouts plugin does (promote, abort, undo), for the demo and the
// acceptance tests that run the real Rollouts controller. It never plays the
// controller's part: it only writes what a user writes.
package argorollouts

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Phases of status.phase.
const (
	PhaseHealthy     = "Healthy"
	PhaseProgressing = "Progressing"
	PhasePaused      = "Paused"
	PhaseDegraded    = "Degraded"
)

// Status is what the controller reports about a Rollout.
type Status struct {
	Phase, Message string
	// StableRS and CurrentPodHash are pod-template hashes (the rollouts-pod-template-hash
	// label of the stable and the current ReplicaSet).
	StableRS, CurrentPodHash string
	// Paused: the controller paused the canary at a step (status.pauseConditions).
	Paused bool
	// Aborted: status.abort.
	Aborted bool
	// Observed: the controller has seen the latest spec (status.observedGeneration, a
	// string, equals metadata.generation).
	Observed bool
}

// StatusOf reads ro's status.
func StatusOf(ro *unstructured.Unstructured) Status {
	str := func(f ...string) string { s, _, _ := unstructured.NestedString(ro.Object, f...); return s }
	pauses, _, _ := unstructured.NestedSlice(ro.Object, "status", "pauseConditions")
	aborted, _, _ := unstructured.NestedBool(ro.Object, "status", "abort")
	return Status{
		Phase: str("status", "phase"), Message: str("status", "message"),
		StableRS: str("status", "stableRS"), CurrentPodHash: str("status", "currentPodHash"),
		Paused: len(pauses) > 0, Aborted: aborted,
		Observed: str("status", "observedGeneration") == fmt.Sprint(ro.GetGeneration()),
	}
}

// Healthy reports whether the controller finished the latest spec: observed, phase
// Healthy, and the current ReplicaSet is the stable one.
func (s Status) Healthy() bool {
	return s.Observed && s.Phase == PhaseHealthy && s.StableRS != "" && s.StableRS == s.CurrentPodHash
}

func (s Status) String() string {
	return fmt.Sprintf("phase %q (%s), stable %s, current %s, paused %t, aborted %t, observed %t",
		s.Phase, s.Message, s.StableRS, s.CurrentPodHash, s.Paused, s.Aborted, s.Observed)
}

// Get returns the Rollout ns/name.
func Get(ctx context.Context, dc dynamic.Interface, ns, name string) (*unstructured.Unstructured, error) {
	return dc.Resource(core.RolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// CurrentReplicaSet returns the ReplicaSet of Rollout ns/name's current pod template
// once the Rollout is Healthy (an error until then, or while no ReplicaSet has its hash).
func CurrentReplicaSet(ctx context.Context, dc dynamic.Interface, kc kubernetes.Interface, ns, name string) (*appsv1.ReplicaSet, error) {
	ro, err := Get(ctx, dc, ns, name)
	if err != nil {
		return nil, err
	}
	st := StatusOf(ro)
	if !st.Healthy() {
		return nil, fmt.Errorf("rollout not healthy: %s", st)
	}
	list, err := kc.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if Hash(&list.Items[i]) == st.CurrentPodHash {
			return &list.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no ReplicaSet with hash %s", st.CurrentPodHash)
}

// Promote resumes a canary paused at a step, as `kubectl argo rollouts promote` (v1.8)
// does from the Rollout it reads: it clears status.pauseConditions when the controller has
// set them; when it has not yet (it reached the pause step but did not write the
// condition), it moves status.currentStepIndex past the step instead, or the controller
// would pause there once more after the promote; and it clears spec.paused when set.
func Promote(ctx context.Context, dc dynamic.Interface, ns, name string) error {
	r := dc.Resource(core.RolloutGVR).Namespace(ns)
	ro, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("promote %s/%s: %w", ns, name, err)
	}
	if _, err := r.Patch(ctx, name, types.MergePatchType, promoteStatusPatch(ro), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("promote %s/%s: %w", ns, name, err)
	}
	if paused, _, _ := unstructured.NestedBool(ro.Object, "spec", "paused"); paused {
		if _, err := r.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("promote %s/%s: %w", ns, name, err)
		}
	}
	return nil
}

// promoteStatusPatch is the status patch of Promote for Rollout ro.
func promoteStatusPatch(ro *unstructured.Unstructured) []byte {
	conds, _, _ := unstructured.NestedSlice(ro.Object, "status", "pauseConditions")
	steps, _, _ := unstructured.NestedSlice(ro.Object, "spec", "strategy", "canary", "steps")
	if len(conds) > 0 || len(steps) == 0 {
		return []byte(`{"status":{"pauseConditions":null}}`)
	}
	index, _, _ := unstructured.NestedInt64(ro.Object, "status", "currentStepIndex")
	if index < int64(len(steps)) {
		index++
	}
	return fmt.Appendf(nil, `{"status":{"pauseConditions":null,"currentStepIndex":%d}}`, index)
}

// Abort aborts the canary in progress, as `kubectl argo rollouts abort` does: the
// controller scales the canary down and the stable ReplicaSet back up.
func Abort(ctx context.Context, dc dynamic.Interface, ns, name string) error {
	_, err := dc.Resource(core.RolloutGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType,
		[]byte(`{"status":{"abort":true}}`), metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("abort %s/%s: %w", ns, name, err)
	}
	return nil
}

// SetTemplate replaces the Rollout's pod template (a new revision, or an undo), retrying
// on conflicts.
func SetTemplate(ctx context.Context, dc dynamic.Interface, ns, name string, tmpl corev1.PodTemplateSpec) error {
	obj, err := Template(tmpl)
	if err != nil {
		return err
	}
	r := dc.Resource(core.RolloutGVR).Namespace(ns)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ro, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(ro.Object, obj, "spec", "template"); err != nil {
			return err
		}
		_, err = r.Update(ctx, ro, metav1.UpdateOptions{})
		return err
	})
}

// Undo sets the Rollout's template back to the one of rs (a ReplicaSet it owns), as
// `kubectl argo rollouts undo` does; the controller then reuses rs.
func Undo(ctx context.Context, dc dynamic.Interface, rs *appsv1.ReplicaSet, rollout string) error {
	tmpl := *rs.Spec.Template.DeepCopy()
	delete(tmpl.Labels, core.RolloutHashLabel)
	return SetTemplate(ctx, dc, rs.Namespace, rollout, tmpl)
}

// Template converts a pod template to the unstructured form a Rollout's spec.template
// holds (labels and annotations kept, no creationTimestamp).
func Template(tmpl corev1.PodTemplateSpec) (map[string]any, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		return nil, err
	}
	meta := map[string]any{"labels": toAny(tmpl.Labels)}
	if len(tmpl.Annotations) > 0 {
		meta["annotations"] = toAny(tmpl.Annotations)
	}
	obj["metadata"] = meta
	return obj, nil
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Hash is a ReplicaSet's rollouts-pod-template-hash label.
func Hash(rs *appsv1.ReplicaSet) string { return rs.Labels[core.RolloutHashLabel] }

// UsesConfigMap reports whether a pod spec references the ConfigMap name (volume,
// projected volume, envFrom or env).
func UsesConfigMap(spec corev1.PodSpec, name string) bool {
	return slices.Contains(ConfigMapsOf(spec), name)
}

// ConfigMapsOf lists the ConfigMaps a pod spec references (volumes, projected volumes,
// envFrom and env of every container and init container), for checks that must not
// depend on the product's own reader.
func ConfigMapsOf(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			out = append(out, v.ConfigMap.Name)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					out = append(out, s.ConfigMap.Name)
				}
			}
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				out = append(out, e.ConfigMapRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				out = append(out, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	return out
}

// SecretsOf lists the Secrets a pod spec references (volumes, projected volumes,
// envFrom and env).
func SecretsOf(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.Secret != nil {
					out = append(out, s.Secret.Name)
				}
			}
		}
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil {
				out = append(out, e.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	return out
}

// PodReady reports whether a Pod is Running with condition Ready.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// OwnedBy reports whether obj has an ownerReference to uid.
func OwnedBy(obj metav1.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// MarshalStatus is the Rollout's status as JSON (for failure messages).
func MarshalStatus(ro *unstructured.Unstructured) string {
	st, _, _ := unstructured.NestedMap(ro.Object, "status")
	b, _ := json.Marshal(st)
	return string(b)
}
