package argorollouts

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestStatusOf(t *testing.T) {
	rollout := func(generation int64, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
		u.SetGeneration(generation)
		return u
	}
	tests := []struct {
		name    string
		ro      *unstructured.Unstructured
		healthy bool
		want    Status
	}{
		{"healthy once the stable ReplicaSet is the current one and the spec observed",
			rollout(3, map[string]any{"phase": "Healthy", "stableRS": "abc", "currentPodHash": "abc", "observedGeneration": "3"}),
			true, Status{Phase: "Healthy", StableRS: "abc", CurrentPodHash: "abc", Observed: true}},
		{"not healthy while the latest spec is unobserved (observedGeneration is a string)",
			rollout(4, map[string]any{"phase": "Healthy", "stableRS": "abc", "currentPodHash": "abc", "observedGeneration": "3"}),
			false, Status{Phase: "Healthy", StableRS: "abc", CurrentPodHash: "abc"}},
		{"paused at a step with a canary in progress",
			rollout(2, map[string]any{"phase": "Paused", "stableRS": "abc", "currentPodHash": "def", "observedGeneration": "2",
				"pauseConditions": []any{map[string]any{"reason": "CanaryPauseStep"}}}),
			false, Status{Phase: "Paused", StableRS: "abc", CurrentPodHash: "def", Paused: true, Observed: true}},
		{"aborted", rollout(2, map[string]any{"phase": "Degraded", "abort": true, "observedGeneration": "2"}),
			false, Status{Phase: "Degraded", Aborted: true, Observed: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := StatusOf(tc.ro)
			if got != tc.want {
				t.Fatalf("StatusOf = %+v, want %+v", got, tc.want)
			}
			if got.Healthy() != tc.healthy {
				t.Fatalf("Healthy() = %t, want %t", got.Healthy(), tc.healthy)
			}
		})
	}
}

func TestReferencesOfAPodSpec(t *testing.T) {
	spec := corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "a", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-volume"}}}},
			{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s-volume"}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-projected"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s-projected"}}}}}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}}}}}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s-envfrom"}}}},
			Env: []corev1.EnvVar{
				{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-env"}}}},
				{Name: "Y", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s-env"}}}},
			},
		}},
	}
	t.Run("ConfigMaps from volumes, projections, envFrom and env of every container", func(t *testing.T) {
		if got, want := ConfigMapsOf(spec), []string{"cm-volume", "cm-projected", "cm-init", "cm-env"}; !slices.Equal(got, want) {
			t.Fatalf("ConfigMapsOf = %v, want %v", got, want)
		}
	})
	t.Run("Secrets from volumes, projections, envFrom and env", func(t *testing.T) {
		if got, want := SecretsOf(spec), []string{"s-volume", "s-projected", "s-envfrom", "s-env"}; !slices.Equal(got, want) {
			t.Fatalf("SecretsOf = %v, want %v", got, want)
		}
	})
}
