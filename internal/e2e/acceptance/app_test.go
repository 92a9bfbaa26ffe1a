package acceptance_test

import (
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// app is one revision of a workload's pod template: a ConfigMap (volume), optionally a
// Secret (envFrom), and a VERSION variable (a template change that keeps the config).
type app struct {
	name      string
	replicas  int32
	configMap string
	secret    string
	version   string
	// history is revisionHistoryLimit; nil keeps the controller's default (10).
	history *int32
	// pause: canary steps setWeight 50 then an indefinite pause; otherwise no steps (the
	// new ReplicaSet takes over at once).
	pause bool
}

func (a app) with(configMap, version string) app {
	a.configMap, a.version = configMap, version
	return a
}

func ptr[T any](v T) *T { return &v }

func (a app) podTemplate() corev1.PodTemplateSpec {
	c := corev1.Container{Name: "app", Image: "registry.invalid/app:1",
		Env:          []corev1.EnvVar{{Name: "VERSION", Value: a.version}},
		VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}
	if a.secret != "" {
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: a.secret}}}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": a.name}},
		Spec: corev1.PodSpec{
			// No token volume: it would name kube-root-ca.crt, which this control plane
			// does not publish, and the guard checks every ConfigMap a Pod names.
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers:                    []corev1.Container{c},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: a.configMap}}}}},
		},
	}
}

// matches reports whether rs runs this revision of the template.
func (a app) matches(rs *appsv1.ReplicaSet) bool {
	spec := rs.Spec.Template.Spec
	if !argorollouts.UsesConfigMap(spec, a.configMap) || (a.secret != "" && !slices.Contains(argorollouts.SecretsOf(spec), a.secret)) {
		return false
	}
	for _, c := range spec.Containers {
		for _, e := range c.Env {
			if e.Name == "VERSION" {
				return e.Value == a.version
			}
		}
	}
	return a.version == ""
}

func (a app) steps() []any {
	if !a.pause {
		return []any{}
	}
	return []any{map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{}}}
}

func (a app) rollout() (*unstructured.Unstructured, error) {
	tmpl, err := argorollouts.Template(a.podTemplate())
	if err != nil {
		return nil, err
	}
	spec := map[string]any{
		"replicas": int64(a.replicas),
		"selector": map[string]any{"matchLabels": map[string]any{"app": a.name}},
		"template": tmpl,
		"strategy": map[string]any{"canary": map[string]any{"steps": a.steps()}},
	}
	if a.history != nil {
		spec["revisionHistoryLimit"] = int64(*a.history)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": a.name}, "spec": spec,
	}}, nil
}

// deploy creates the Rollout on its first revision, and changes its template after.
func (w *world) deploy(a app) {
	w.T.Helper()
	_, err := argorollouts.Get(w.Ctx, w.Dynamic, w.NS, a.name)
	if err == nil {
		if err := argorollouts.SetTemplate(w.Ctx, w.Dynamic, w.NS, a.name, a.podTemplate()); err != nil {
			w.T.Fatalf("deploy %s: %v", a.configMap, err)
		}
		return
	}
	ro, err := a.rollout()
	if err != nil {
		w.T.Fatal(err)
	}
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, ro, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Rollout %s: %v", a.name, err)
	}
}

// replicaSets lists the ReplicaSets whose controller (a Rollout or a Deployment) is
// called name.
func (w *world) replicaSets(name string) []appsv1.ReplicaSet {
	w.T.Helper()
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if c := metav1.GetControllerOf(&rs); c != nil && c.Name == name {
			out = append(out, rs)
		}
	}
	return out
}

// replicaSetOf returns the one ReplicaSet running this revision of the app's template.
func (w *world) replicaSetOf(a app) (*appsv1.ReplicaSet, error) {
	var found []*appsv1.ReplicaSet
	for _, rs := range w.replicaSets(a.name) {
		if a.matches(&rs) {
			found = append(found, &rs)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d ReplicaSets of %s run %s/%s, want 1", len(found), a.name, a.configMap, a.version)
	}
	return found[0], nil
}

// status reads the Rollout's status.
func (w *world) status(name string) (argorollouts.Status, error) {
	ro, err := argorollouts.Get(w.Ctx, w.Dynamic, w.NS, name)
	if err != nil {
		return argorollouts.Status{}, err
	}
	st := argorollouts.StatusOf(ro)
	w.nudgeIfUnobserved(ro, st)
	return st, nil
}

// nudgeIfUnobserved touches a Rollout whose spec the Rollouts controller has not observed
// for 20 s (an annotation of the harness's own; the controller then sees a new event). The
// controller has been seen to leave a template change unobserved for minutes on a busy
// machine, with nothing of this service involved (twice in about fifteen CI runs; the
// same as argo-rollouts #913's "waiting for rollout spec update to be observed" flake).
func (w *world) nudgeIfUnobserved(ro *unstructured.Unstructured, st argorollouts.Status) {
	key := ro.GetName()
	if st.Observed {
		delete(w.unobserved, key)
		return
	}
	since, seen := w.unobserved[key]
	if !seen {
		w.unobserved[key] = time.Now()
		return
	}
	if time.Since(since) < 20*time.Second {
		return
	}
	w.unobserved[key] = time.Now()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.configmap-attacher.io/nudge":%q}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Patch(w.Ctx, key, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	w.T.Logf("Rollout %s: generation %d unobserved by the Rollouts controller for 20 s (%s); nudged: %v", key, ro.GetGeneration(), st, err)
}

// waitHealthy waits until the Rollout is Healthy on revision a, all its replicas
// Ready and every other ReplicaSet scaled to 0; it returns a's ReplicaSet.
func (w *world) waitHealthy(a app) *appsv1.ReplicaSet {
	w.T.Helper()
	var stable *appsv1.ReplicaSet
	w.Eventually(fmt.Sprintf("Rollout %s Healthy on %s/%s", a.name, a.configMap, a.version), func() error {
		st, err := w.status(a.name)
		if err != nil {
			return err
		}
		if !st.Healthy() {
			return fmt.Errorf("rollout %s", st)
		}
		rs, err := w.replicaSetOf(a)
		if err != nil {
			return err
		}
		if argorollouts.Hash(rs) != st.StableRS || rs.Status.ReadyReplicas != a.replicas || rs.Status.AvailableReplicas != a.replicas {
			return fmt.Errorf("%s: hash %s (stable %s), %d/%d Ready", rs.Name, argorollouts.Hash(rs), st.StableRS, rs.Status.ReadyReplicas, a.replicas)
		}
		for _, other := range w.replicaSets(a.name) {
			if other.UID != rs.UID && other.Status.Replicas != 0 {
				return fmt.Errorf("old ReplicaSet %s still has %d Pods", other.Name, other.Status.Replicas)
			}
		}
		stable = rs
		return nil
	})
	return stable
}

// waitPaused waits until revision a is a canary paused at its step with its Pods
// available; it returns the canary ReplicaSet.
func (w *world) waitPaused(a app) *appsv1.ReplicaSet {
	w.T.Helper()
	var canary *appsv1.ReplicaSet
	w.Eventually(fmt.Sprintf("the canary of %s/%s paused", a.configMap, a.version), func() error {
		st, err := w.status(a.name)
		if err != nil {
			return err
		}
		rs, err := w.replicaSetOf(a)
		if err != nil {
			return err
		}
		if !st.Observed || !st.Paused || st.CurrentPodHash != argorollouts.Hash(rs) {
			return fmt.Errorf("rollout %s", st)
		}
		if n := *rs.Spec.Replicas; n == 0 || rs.Status.AvailableReplicas != n {
			return fmt.Errorf("canary %s: %d/%d available", rs.Name, rs.Status.AvailableReplicas, n)
		}
		canary = rs
		return nil
	})
	return canary
}

// waitOwned waits until the ConfigMap (or Secret, kind "Secret") is owned by rs through
// a non-controller ownerReference.
func (w *world) waitOwned(kind, name string, rs *appsv1.ReplicaSet) {
	w.T.Helper()
	w.Eventually(fmt.Sprintf("%s %s owned by %s", kind, name, rs.Name), func() error {
		var obj metav1.Object
		var err error
		if kind == "Secret" {
			obj, err = w.Kube.CoreV1().Secrets(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		} else {
			obj, err = w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		}
		if err != nil {
			return err
		}
		for _, o := range obj.GetOwnerReferences() {
			if o.UID == rs.UID && o.Kind == "ReplicaSet" && o.APIVersion == "apps/v1" {
				if o.Controller != nil && *o.Controller {
					return fmt.Errorf("a controller reference: %+v", o)
				}
				return nil
			}
		}
		return fmt.Errorf("owners %v", obj.GetOwnerReferences())
	})
}

// owners returns the UIDs owning the ConfigMap.
func (w *world) owners(name string) []string {
	w.T.Helper()
	var out []string
	for _, o := range w.mustExist(name).OwnerReferences {
		out = append(out, string(o.UID))
	}
	slices.Sort(out)
	return out
}

// podsOf lists the live Pods rs controls.
func (w *world) podsOf(rs *appsv1.ReplicaSet) []corev1.Pod {
	w.T.Helper()
	list, err := w.Kube.CoreV1().Pods(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if metav1.IsControlledBy(&p, rs) && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// replacePod deletes one Pod of rs (a spot reclaim) and waits for the ReplicaSet's
// Ready replacement, which it returns.
func (w *world) replacePod(rs *appsv1.ReplicaSet) corev1.Pod {
	w.T.Helper()
	pods := w.podsOf(rs)
	if len(pods) == 0 {
		w.T.Fatalf("ReplicaSet %s has no Pod to replace", rs.Name)
	}
	victim := pods[0]
	if err := w.Kube.CoreV1().Pods(w.NS).Delete(w.Ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		w.T.Fatalf("delete Pod %s: %v", victim.Name, err)
	}
	var got corev1.Pod
	w.Eventually("a Ready replacement Pod of "+rs.Name, func() error {
		for _, p := range w.podsOf(rs) {
			if argorollouts.PodReady(&p) && !slices.ContainsFunc(pods, func(q corev1.Pod) bool { return q.UID == p.UID }) {
				got = p
				return nil
			}
		}
		return fmt.Errorf("no new Ready Pod of %s", rs.Name)
	})
	return got
}

// podsReady waits until rs has n Ready Pods, each running template a, and returns them.
func (w *world) podsReady(rs *appsv1.ReplicaSet, a app, n int) []corev1.Pod {
	w.T.Helper()
	var pods []corev1.Pod
	w.Eventually(fmt.Sprintf("%d Ready Pods of %s", n, rs.Name), func() error {
		pods = w.podsOf(rs)
		ready := 0
		for _, p := range pods {
			if !argorollouts.UsesConfigMap(p.Spec, a.configMap) {
				return fmt.Errorf("Pod %s of %s uses %v, want %s", p.Name, rs.Name, argorollouts.ConfigMapsOf(p.Spec), a.configMap)
			}
			if argorollouts.PodReady(&p) {
				ready++
			}
		}
		if ready != n || len(pods) != n {
			return fmt.Errorf("%s: %d Pods, %d Ready, want %d", rs.Name, len(pods), ready, n)
		}
		return nil
	})
	return pods
}
