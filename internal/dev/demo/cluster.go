package demo

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// configMap creates an opted-in revision of the family web-config.
func (p *player) configMap(ctx context.Context, name, data string) error {
	_, err := p.kc.CoreV1().ConfigMaps(p.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true", core.LabelFamily: "web-config"}},
		Data:       map[string]string{"config.yaml": data},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating ConfigMap %s: %w", name, err)
	}
	return nil
}

// podTemplate is the web Pod mounting configMap. No service-account token is mounted:
// the embedded default publishes no kube-root-ca.crt, and the demo's consistency check
// wants every ConfigMap a Pod names to exist.
func podTemplate(configMap string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": rolloutName}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  ptr(false),
			TerminationGracePeriodSeconds: ptr(int64(0)),
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}}}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}},
		},
	}
}

func rollout(configMap string) (*unstructured.Unstructured, error) {
	tmpl, err := argorollouts.Template(podTemplate(configMap))
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": rolloutName},
		"spec": map[string]any{
			"replicas":             int64(replicas),
			"revisionHistoryLimit": int64(historyLimit),
			"selector":             map[string]any{"matchLabels": map[string]any{"app": rolloutName}},
			"template":             tmpl,
			"strategy": map[string]any{"canary": map[string]any{"steps": []any{
				map[string]any{"setWeight": int64(canaryWeight)}, map[string]any{"pause": map[string]any{}}}}},
		},
	}}, nil
}

// templateConfigMaps lists the ConfigMaps the Rollout's pod template names.
func templateConfigMaps(ro *unstructured.Unstructured) ([]string, error) {
	raw, _, _ := unstructured.NestedMap(ro.Object, "spec", "template")
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		return nil, fmt.Errorf("the Rollout's template: %w", err)
	}
	return argorollouts.ConfigMapsOf(tmpl.Spec), nil
}

// replicaSetUsing returns the Rollout's one ReplicaSet whose template uses configMap.
func (p *player) replicaSetUsing(ctx context.Context, configMap string) (*appsv1.ReplicaSet, error) {
	list, err := p.kc.AppsV1().ReplicaSets(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + rolloutName})
	if err != nil {
		return nil, err
	}
	var found []*appsv1.ReplicaSet
	for i := range list.Items {
		if argorollouts.UsesConfigMap(list.Items[i].Spec.Template.Spec, configMap) {
			found = append(found, &list.Items[i])
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d ReplicaSets use %s, want 1", len(found), configMap)
	}
	return found[0], nil
}

// waitHealthy waits until the Rollout is Healthy on the ReplicaSet using configMap, with
// every replica Ready and every other ReplicaSet scaled to 0; it returns that ReplicaSet.
func (p *player) waitHealthy(ctx context.Context, configMap string) (*appsv1.ReplicaSet, error) {
	var stable *appsv1.ReplicaSet
	err := p.wait(ctx, "the Rollout Healthy on "+configMap, func() error {
		ro, err := argorollouts.Get(ctx, p.dc, p.ns, rolloutName)
		if err != nil {
			return err
		}
		st := argorollouts.StatusOf(ro)
		if !st.Healthy() {
			return fmt.Errorf("rollout %s", st)
		}
		rs, err := p.replicaSetUsing(ctx, configMap)
		if err != nil {
			return err
		}
		if argorollouts.Hash(rs) != st.StableRS || rs.Status.ReadyReplicas != replicas || rs.Status.AvailableReplicas != replicas {
			return fmt.Errorf("%s: hash %s (stable %s), %d Ready", rs.Name, argorollouts.Hash(rs), st.StableRS, rs.Status.ReadyReplicas)
		}
		stable = rs
		return p.othersScaledDown(ctx, rs)
	})
	return stable, err
}

func (p *player) othersScaledDown(ctx context.Context, keep *appsv1.ReplicaSet) error {
	list, err := p.kc.AppsV1().ReplicaSets(p.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + rolloutName})
	if err != nil {
		return err
	}
	for _, rs := range list.Items {
		if rs.UID != keep.UID && rs.Status.Replicas != 0 {
			return fmt.Errorf("old ReplicaSet %s still has %d Pods", rs.Name, rs.Status.Replicas)
		}
	}
	return nil
}

// waitPaused waits until the canary of configMap is paused at its step with its Pods
// available and the stable ReplicaSet's Pods Ready; it returns the canary ReplicaSet.
func (p *player) waitPaused(ctx context.Context, configMap string, stable *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	var canary *appsv1.ReplicaSet
	err := p.wait(ctx, "the canary of "+configMap+" paused at its weight", func() error {
		ro, err := argorollouts.Get(ctx, p.dc, p.ns, rolloutName)
		if err != nil {
			return err
		}
		st := argorollouts.StatusOf(ro)
		rs, err := p.replicaSetUsing(ctx, configMap)
		if err != nil {
			return err
		}
		if !st.Observed || !st.Paused || st.CurrentPodHash != argorollouts.Hash(rs) {
			return fmt.Errorf("rollout %s", st)
		}
		if n := *rs.Spec.Replicas; n == 0 || rs.Status.AvailableReplicas != n {
			return fmt.Errorf("canary %s: %d/%d available", rs.Name, rs.Status.AvailableReplicas, n)
		}
		s, err := p.kc.AppsV1().ReplicaSets(p.ns).Get(ctx, stable.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s.Status.ReadyReplicas == 0 || s.Status.ReadyReplicas != *s.Spec.Replicas {
			return fmt.Errorf("stable %s: %d/%d Ready", s.Name, s.Status.ReadyReplicas, *s.Spec.Replicas)
		}
		canary = rs
		return nil
	})
	return canary, err
}

// podsOf lists the live Pods rs controls.
func (p *player) podsOf(ctx context.Context, rs *appsv1.ReplicaSet) ([]corev1.Pod, error) {
	list, err := p.kc.CoreV1().Pods(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if metav1.IsControlledBy(&pod, rs) && pod.DeletionTimestamp == nil {
			out = append(out, pod)
		}
	}
	return out, nil
}

func (p *player) waitOwned(ctx context.Context, name string, rs *appsv1.ReplicaSet) error {
	return p.wait(ctx, name+" owned by "+rs.Name, func() error { return p.owned(name, rs) })
}

// owned checks that the ConfigMap exists and has an ownerReference to rs.
func (p *player) owned(name string, rs *appsv1.ReplicaSet) error {
	cm, err := p.kc.CoreV1().ConfigMaps(p.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if !argorollouts.OwnedBy(cm, rs.UID) {
		return fmt.Errorf("%s has owners %v, not %s", name, cm.OwnerReferences, rs.Name)
	}
	return nil
}

// waitGone waits until get answers NotFound.
func (p *player) waitGone(ctx context.Context, kind, name string, get func() error) error {
	return p.wait(ctx, kind+" "+name+" deleted", func() error {
		if err := get(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s %w (err %v)", kind, name, errNotGone, err)
		}
		return nil
	})
}

func ptr[T any](v T) *T { return &v }
