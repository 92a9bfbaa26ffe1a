package acceptance_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Scenario 15. Blue-green with previewReplicaCount (the preview runs 1 of 3 Pods until
// the promotion scales it up) and scaleDownDelaySeconds, revisionHistoryLimit 1, over
// three releases: each preview ReplicaSet owns its revision from its first Pod, a
// preview Pod and an active Pod replaced meanwhile find theirs, the old active keeps its
// revision through the delay and as the kept old ReplicaSet, and the third release
// pushes the first ReplicaSet out of history and its revision with it. No revision in
// use is ever missing.
func TestBlueGreenPreviewReplicasAndScaleDownDelayKeepEveryRevisionInUse(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	w.guardUsedRevisions()
	base := app{name: "web", replicas: 3, history: ptr(int32(1))}
	v1 := base.with("web-config-1", "1")
	w.service("web-active", base.name)
	w.service("web-preview", base.name)
	w.revision(v1.configMap)
	w.createRollout(v1, map[string]any{"blueGreen": map[string]any{
		"activeService": "web-active", "previewService": "web-preview", "autoPromotionEnabled": false,
		"previewReplicaCount": int64(1), "scaleDownDelaySeconds": int64(5)}}, nil)
	active := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, active)

	for i := 2; i <= 3; i++ {
		v := base.with(fmt.Sprintf("web-config-%d", i), fmt.Sprint(i))
		w.revision(v.configMap)
		w.deploy(v)
		preview := w.waitPreview(v, 1)
		w.waitOwned("ConfigMap", v.configMap, preview)
		if p := w.replacePod(preview); !argorollouts.UsesConfigMap(p.Spec, v.configMap) {
			t.Fatalf("preview replacement %s uses %v", p.Name, argorollouts.ConfigMapsOf(p.Spec))
		}
		w.replacePod(active)
		w.promote(base.name)
		w.waitHealthy(v) // the old active scaled down after the delay
		w.waitOwned("ConfigMap", v.configMap, preview)
		active = preview
	}
	w.Eventually("two ReplicaSets and exactly their revisions", func() error { return w.revisionsMatchReplicaSets(base.name, 2) })
	w.Eventually("the revisions are exactly those the ReplicaSets left use", w.revisionsMatchAllReplicaSets)
	t.Logf("guard checked %d Pods", w.events.podsChecked())
}

// waitPreview waits until revision a is a paused blue-green preview with n Ready Pods
// (previewReplicaCount) and returns its ReplicaSet.
func (w *world) waitPreview(a app, n int32) *appsv1.ReplicaSet {
	w.T.Helper()
	var preview *appsv1.ReplicaSet
	w.Eventually(fmt.Sprintf("the preview of %s/%s paused with %d Pods", a.configMap, a.version, n), func() error {
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
		if *rs.Spec.Replicas != n || rs.Status.ReadyReplicas != n {
			return fmt.Errorf("preview %s: %d desired, %d Ready, want %d", rs.Name, *rs.Spec.Replicas, rs.Status.ReadyReplicas, n)
		}
		preview = rs
		return nil
	})
	return preview
}
