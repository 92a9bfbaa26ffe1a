package acceptance_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Scenario 12. A canary with an experiment step (a baseline from the stable template and
// a copy of the canary, each one Pod) and an analysis run by the real controller (a web
// metric against a local HTTP endpoint). The Experiment's ReplicaSets are owned by the
// Experiment, not the Rollout: the service attaches each one's revision to it, so the
// stable revision outlives the stable ReplicaSet for as long as the baseline ReplicaSet
// (kept, scaled down, with its Experiment) uses it, and goes with it when the next
// release deletes that Experiment. No revision in use is ever missing.
func TestCanaryExperimentReplicaSetsKeepTheirRevisions(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	w.guardUsedRevisions()
	ok := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write([]byte(`{"status":"ok"}`))
	}))
	t.Cleanup(ok.Close)
	w.createObject("analysistemplates", core.RolloutGroup, core.RolloutVersion, map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate", "metadata": map[string]any{"name": "smoke"},
		"spec": map[string]any{"metrics": []any{map[string]any{
			"name": "smoke", "count": int64(2), "interval": "1s", "successCondition": `result == "ok"`,
			"provider": map[string]any{"web": map[string]any{"url": ok.URL + "/health", "jsonPath": "{$.status}"}},
		}}},
	})
	steps := []any{
		map[string]any{"setWeight": int64(50)},
		map[string]any{"experiment": map[string]any{
			"templates": []any{
				map[string]any{"name": "baseline", "specRef": "stable", "replicas": int64(1)},
				map[string]any{"name": "candidate", "specRef": "canary", "replicas": int64(1)},
			},
			"analyses": []any{map[string]any{"name": "smoke", "templateName": "smoke", "requiredForCompletion": true}},
		}},
		map[string]any{"pause": map[string]any{}},
	}
	base := app{name: "web", replicas: 2, history: ptr(int32(0)), pause: true}
	v1, v2, v3 := base.with("web-config-1", "1"), base.with("web-config-2", "2"), base.with("web-config-3", "3")
	w.revision(v1.configMap)
	w.createRollout(v1, map[string]any{"canary": map[string]any{"steps": steps}}, nil)
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.deploy(v2)
	exp2 := w.experimentReplicaSets(map[string]string{"baseline": v1.configMap, "candidate": v2.configMap})
	w.waitExperimentDone()
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
	w.promote(v1.name)
	w.waitHealthy(v2)
	w.WaitGone("ReplicaSet "+rs1.Name, func() error { _, err := w.getErr(rs1); return err })
	// The stable ReplicaSet is gone (revisionHistoryLimit 0); the baseline ReplicaSet of
	// the kept Experiment still uses the stable revision, and owns it.
	baseline := exp2["baseline"]
	if _, err := w.getErr(&baseline); err == nil {
		w.mustExist(v1.configMap)
		w.waitOwned("ConfigMap", v1.configMap, &baseline)
	}

	// The next release: its own Experiment (baseline v2, candidate v3); once promoted,
	// the controller deletes the previous Experiment (its ReplicaSet is gone), the
	// garbage collector its ReplicaSets, and with them the first revision.
	w.revision(v3.configMap)
	w.deploy(v3)
	w.experimentReplicaSets(map[string]string{"baseline": v2.configMap, "candidate": v3.configMap})
	w.waitExperimentDone()
	w.waitPaused(v3)
	w.promote(v1.name)
	w.waitHealthy(v3)
	w.waitConfigMapGone(v1.configMap)
	w.Eventually("the revisions are exactly those the ReplicaSets left use", w.revisionsMatchAllReplicaSets)
	t.Logf("guard checked %d Pods", w.events.podsChecked())
}

// experimentReplicaSets waits for the running Experiment's ReplicaSets, one per template
// name in want, each with its Pod Ready and owning the ConfigMap want names; it returns
// them by template name.
func (w *world) experimentReplicaSets(want map[string]string) map[string]appsv1.ReplicaSet {
	w.T.Helper()
	out := map[string]appsv1.ReplicaSet{}
	w.Eventually(fmt.Sprintf("the Experiment's ReplicaSets %v Ready", want), func() error {
		clear(out)
		for _, rs := range w.replicaSetsControlledBy("Experiment") {
			for tmpl, cm := range want {
				if argorollouts.UsesConfigMap(rs.Spec.Template.Spec, cm) && rs.Status.ReadyReplicas == 1 && *rs.Spec.Replicas == 1 {
					out[tmpl] = rs
				}
			}
		}
		if len(out) != len(want) {
			return fmt.Errorf("found %d of %d", len(out), len(want))
		}
		return nil
	})
	for tmpl, rs := range out {
		if c := metav1.GetControllerOf(&rs); c == nil || c.Kind != "Experiment" {
			w.T.Fatalf("ReplicaSet %s of template %s is controlled by %v, want an Experiment", rs.Name, tmpl, c)
		}
		w.waitOwned("ConfigMap", want[tmpl], &rs)
	}
	return out
}

// waitExperimentDone waits until every Experiment of the namespace is Successful.
func (w *world) waitExperimentDone() {
	w.T.Helper()
	gvr := core.RolloutGVR
	gvr.Resource = "experiments"
	w.Eventually("the Experiment Successful", func() error {
		list, err := w.Dynamic.Resource(gvr).Namespace(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no Experiment yet")
		}
		for _, ex := range list.Items {
			phase, _, _ := unstructured.NestedString(ex.Object, "status", "phase")
			if phase != "Successful" {
				msg, _, _ := unstructured.NestedString(ex.Object, "status", "message")
				return fmt.Errorf("experiment %s: %q (%s)", ex.GetName(), phase, msg)
			}
		}
		return nil
	})
}
