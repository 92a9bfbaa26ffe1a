package acceptance_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Scenario 11. A blue-green Rollout (manual promotion, scaleDownDelaySeconds,
// revisionHistoryLimit 0): the preview ReplicaSet owns its revision while the active
// one keeps serving with its own; after the promotion the old ReplicaSet keeps its Pods
// for the scale-down delay, and its revision with them, and the revision goes only once
// the controller has scaled that ReplicaSet down and deleted it.
func TestBlueGreenKeepsTheOldRevisionThroughTheScaleDownDelay(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1", history: ptr(int32(0))}
	v2 := v1.with("web-config-2", "2")
	w.service("web-active", v1.name)
	w.revision(v1.configMap)
	ro, err := v1.rollout()
	if err != nil {
		t.Fatal(err)
	}
	ro.Object["spec"].(map[string]any)["strategy"] = map[string]any{"blueGreen": map[string]any{
		"activeService": "web-active", "autoPromotionEnabled": false, "scaleDownDelaySeconds": int64(3)}}
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, ro, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Rollout: %v", err)
	}
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
	w.replacePod(rs1) // the active side restarts a Pod while the preview waits: the guard checks its config
	w.mustExist(v1.configMap)

	w.plugin("promote", v1.name)
	w.Eventually("the promotion: the preview ReplicaSet is the stable one", func() error {
		st, err := w.status(v1.name)
		if err != nil {
			return err
		}
		if st.StableRS != argorollouts.Hash(rs2) {
			return fmt.Errorf("rollout %s", st)
		}
		return nil
	})
	// Within the scale-down delay the old Pods run on: their revision must be there (read
	// first, so a revision gone while the ReplicaSet still has Pods is a violation).
	_, cmErr := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, v1.configMap, metav1.GetOptions{})
	if old, err := w.getErr(rs1); apierrors.IsNotFound(cmErr) && err == nil && old.Status.Replicas > 0 {
		t.Fatalf("revision %s deleted while %s still has %d Pods", v1.configMap, rs1.Name, old.Status.Replicas)
	}
	w.waitHealthy(v2)
	w.WaitGone("ReplicaSet "+rs1.Name, func() error { _, err := w.getErr(rs1); return err })
	w.waitConfigMapGone(v1.configMap)
	w.lag("ReplicaSet", rs1.Name, "ConfigMap", v1.configMap)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
}

// service creates a ClusterIP Service selecting the app's Pods (a blue-green Rollout
// switches its selector).
func (w *world) service(name, app string) {
	w.T.Helper()
	_, err := w.Kube.CoreV1().Services(w.NS).Create(w.Ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": app},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		w.T.Fatalf("create Service %s: %v", name, err)
	}
}
