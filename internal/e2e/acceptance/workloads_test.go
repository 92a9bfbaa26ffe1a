package acceptance_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Scenario 7. The other workload shapes: a Rollout whose template comes from a
// Deployment (workloadRef), a Deployment's own rolling update with its
// revisionHistoryLimit, and Secrets through a canary, a spot replacement, an abort and
// the history limit.
func TestWorkloadShapes(t *testing.T) {
	t.Run("Rollout with workloadRef to a Deployment", testWorkloadRef)
	t.Run("Deployment rolling update keeps revisionHistoryLimit", testDeploymentRollingUpdate)
	t.Run("Secrets through canary, spot replacement, abort and history", testSecrets)
}

func testWorkloadRef(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	// The Deployment only holds the template (0 replicas); the Rollout runs it.
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1", pause: true}
	v2 := v1.with("web-config-2", "2")
	w.revision(v1.configMap)
	w.createDeployment("web-template", v1, 0, nil)
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": map[string]any{"name": v1.name},
		"spec": map[string]any{
			"replicas":    int64(v1.replicas),
			"selector":    map[string]any{"matchLabels": map[string]any{"app": v1.name}},
			"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-template"},
			"strategy":    map[string]any{"canary": map[string]any{"steps": v1.steps()}},
		},
	}}
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, ro, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Rollout: %v", err)
	}
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.updateDeployment("web-template", v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
	w.replacePod(rs1)
	w.mustExist(v1.configMap)
	w.plugin("promote", v1.name)
	w.waitHealthy(v2)
	w.waitOwned("ConfigMap", v1.configMap, rs1)
}

func testDeploymentRollingUpdate(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	base := app{name: "api", replicas: 3}
	for i := 1; i <= 4; i++ {
		v := base.with(fmt.Sprintf("api-config-%d", i), fmt.Sprint(i))
		w.revision(v.configMap)
		if i == 1 {
			w.createDeployment(base.name, v, v.replicas, ptr(int32(1)))
		} else {
			w.updateDeployment(base.name, v)
		}
		rs := w.waitDeploymentComplete(v)
		w.podsReady(rs, v, int(v.replicas))
		w.waitOwned("ConfigMap", v.configMap, rs)
	}
	w.Eventually("revisionHistoryLimit 1: two ReplicaSets and exactly their revisions", func() error {
		return w.revisionsMatchReplicaSets(base.name, 2)
	})
	w.mustExist("api-config-4")
	w.mustExist("api-config-3")
}

func testSecrets(t *testing.T) {
	w := newWorld(t)
	// The built-in watcher attaches ConfigMaps only (its trigger spec is the default):
	// Secrets come through the real Argo Events Sensor with includeSecrets.
	w.ServeArgoSensor(server.Options{AllowSecrets: true}, map[string]string{"includeSecrets": "true"})
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", secret: "web-secret-1", version: "1", history: ptr(int32(0)), pause: true}
	v2 := v1.with("web-config-2", "2")
	v2.secret = "web-secret-2"
	w.revision(v1.configMap)
	w.secretRevision(v1.secret)
	w.deploy(v1)
	rs1 := w.waitHealthy(v1)
	w.waitOwned("Secret", v1.secret, rs1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.secretRevision(v2.secret)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("Secret", v2.secret, rs2)
	w.replacePod(rs1) // the guard checks its Secret exists
	w.plugin("abort", v1.name)
	w.podsReady(rs1, v1, int(v1.replicas))
	w.waitOwned("Secret", v1.secret, rs1)
	w.waitOwned("Secret", v2.secret, rs2)

	w.deploy(v1) // revert: the aborted ReplicaSet leaves (revisionHistoryLimit 0)
	w.waitHealthy(v1)
	w.WaitGone("ReplicaSet "+rs2.Name, func() error { _, err := w.getErr(rs2); return err })
	w.WaitGone("Secret "+v2.secret, func() error {
		_, err := w.Kube.CoreV1().Secrets(w.NS).Get(w.Ctx, v2.secret, metav1.GetOptions{})
		return err
	})
	w.lag("ReplicaSet", rs2.Name, "Secret", v2.secret)
	w.waitOwned("Secret", v1.secret, rs1)
}

// createDeployment creates a Deployment running revision a.
func (w *world) createDeployment(name string, a app, replicas int32, history *int32) {
	w.T.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, RevisionHistoryLimit: history,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": a.name}}, Template: a.podTemplate()},
	}
	if _, err := w.Kube.AppsV1().Deployments(w.NS).Create(w.Ctx, d, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Deployment %s: %v", name, err)
	}
}

// updateDeployment sets the Deployment's template to revision a.
func (w *world) updateDeployment(name string, a app) {
	w.T.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := w.Kube.AppsV1().Deployments(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template = a.podTemplate()
		_, err = w.Kube.AppsV1().Deployments(w.NS).Update(w.Ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		w.T.Fatalf("update Deployment %s: %v", name, err)
	}
}

// waitDeploymentComplete waits until the real Deployment controller has rolled the
// Deployment a.name out to revision a, and returns its ReplicaSet.
func (w *world) waitDeploymentComplete(a app) *appsv1.ReplicaSet {
	w.T.Helper()
	var rs *appsv1.ReplicaSet
	w.Eventually("Deployment "+a.name+" rolled out to "+a.configMap, func() error {
		d, err := w.Kube.AppsV1().Deployments(w.NS).Get(w.Ctx, a.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := d.Status
		if st.ObservedGeneration != d.Generation || st.UpdatedReplicas != a.replicas || st.AvailableReplicas != a.replicas || st.Replicas != a.replicas {
			return fmt.Errorf("deployment status %+v", st)
		}
		rs, err = w.replicaSetOf(a)
		return err
	})
	if !argorollouts.UsesConfigMap(rs.Spec.Template.Spec, a.configMap) {
		w.T.Fatalf("%s does not use %s", rs.Name, a.configMap)
	}
	return rs
}
