package gc_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The Deployment and Rollout informers start only once the cluster needs them (the
// cache's lazyListers), so the cache reports synced without them. A revision that only a
// Deployment's or a Rollout's configmap-attacher.io/configmaps annotation lists (no
// template, Pod or ReplicaSet uses it) must survive a cached sweep of a cluster whose
// RBAC forbids listing that kind: the sweep fails, unavailable, and is not held for the
// life of the cluster (safety rule 7: a revision a live workload lists is never deleted).
func TestCachedSweepKeepsARevisionOnlyAWorkloadItCannotListNames(t *testing.T) {
	read := []string{"list", "watch", "get"}
	for _, tc := range []struct {
		name    string
		forbid  string // the resource left out of the Role
		listing func(t *testing.T, e *env)
	}{
		{"Deployments forbidden", "deployments", deploymentListing},
		{"Rollouts forbidden", "rollouts", rolloutListing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := setup(t)
			e.configMap(t, "cfg-1a2b3c", "cfg", nil)
			tc.listing(t, e)
			apps := []string{"replicasets", "deployments", "statefulsets", "daemonsets", "controllerrevisions"}
			rollouts := []string{"rollouts"}
			if tc.forbid == "deployments" {
				apps = apps[:1:1]
				apps = append(apps, "statefulsets", "daemonsets", "controllerrevisions")
			} else {
				rollouts = []string{"rollouts/status"} // not the Rollouts themselves
			}
			clients := e.restrictedClients(t, "no-"+tc.forbid, []rbacv1.PolicyRule{
				{APIGroups: []string{"apps"}, Resources: apps, Verbs: read},
				{APIGroups: []string{"batch"}, Resources: []string{"jobs", "cronjobs"}, Verbs: read},
				{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: read},
				{APIGroups: []string{"argoproj.io"}, Resources: rollouts, Verbs: read},
			})
			c := e.startCacheSyncedWithoutUsers(t, clients)
			e.requireSweepsUnavailable(t, e.cachedSweeper(t, clients, c))
			if !e.exists(t, "cfg-1a2b3c") {
				t.Fatalf("the revision a %s lists was deleted by a sweep that could not read it", tc.forbid)
			}
		})
	}
}

// deploymentListing creates a Deployment whose annotation alone lists cfg-1a2b3c.
func deploymentListing(t *testing.T, e *env) {
	t.Helper()
	lbl := map[string]string{"app": "web"}
	_, err := e.clients.Kube.AppsV1().Deployments(e.ns).Create(context.Background(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{core.AnnotationConfigMaps: "cfg-1a2b3c"}},
		Spec: appsv1.DeploymentSpec{Paused: true, Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// rolloutListing creates a Rollout whose annotation alone lists cfg-1a2b3c.
func rolloutListing(t *testing.T, e *env) {
	t.Helper()
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": core.RolloutGroup + "/" + core.RolloutVersion, "kind": core.RolloutKind,
		"metadata": map[string]any{"name": "web", "annotations": map[string]any{core.AnnotationConfigMaps: "cfg-1a2b3c"}},
		"spec": map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example.invalid/app:1"}}}}}}}
	if _, err := e.clients.Dynamic.Resource(core.RolloutGVR).Namespace(e.ns).Create(context.Background(), ro, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
