package acceptance_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Scenario 1. An aborted canary: the stable Pods, also those created during the canary
// and by the abort, find their revision; the canary's revision lives exactly as long as
// the canary ReplicaSet.
func TestAbortMidCanary(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "web", replicas: 4, configMap: "web-config-1", version: "1", history: ptr(int32(0)), pause: true}
	v2 := v1.with("web-config-2", "2")

	w.revision(v1.configMap)
	w.deploy(v1)
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
	replacement := w.replacePod(rs1)
	if !argorollouts.UsesConfigMap(replacement.Spec, v1.configMap) {
		t.Fatalf("the stable replacement %s uses %v", replacement.Name, argorollouts.ConfigMapsOf(replacement.Spec))
	}
	w.mustExist(v1.configMap)

	w.plugin("abort", v1.name)
	w.Eventually("the abort: canary at 0, stable back to 4", func() error {
		st, err := w.status(v1.name)
		if err != nil || !st.Aborted {
			return fmt.Errorf("rollout %s (err %v)", st, err)
		}
		if got := w.get(rs2); got.Status.Replicas != 0 {
			return fmt.Errorf("canary %s has %d Pods", rs2.Name, got.Status.Replicas)
		}
		return nil
	})
	w.podsReady(rs1, v1, int(v1.replicas))
	w.waitOwned("ConfigMap", v1.configMap, rs1)
	// The aborted canary's ReplicaSet is still the Rollout's current one: its revision stays.
	w.waitOwned("ConfigMap", v2.configMap, rs2)

	// Reverting the template (what a GitOps revert does) ends the canary ReplicaSet's
	// life (revisionHistoryLimit 0), and with it its revision's.
	w.deploy(v1)
	w.waitHealthy(v1)
	w.WaitGone("ReplicaSet "+rs2.Name, func() error { _, err := w.getErr(rs2); return err })
	w.waitConfigMapGone(v2.configMap)
	w.lag("ReplicaSet", rs2.Name, "ConfigMap", v2.configMap)
	w.mustExist(v1.configMap)
	t.Logf("guard checked %d Pods", w.events.podsChecked())
}

// Scenario 2. Undo to a revision kept in history, after later revisions: the controller
// scales its ReplicaSet up again and its revision is there.
func TestUndoToRevisionInHistory(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	base := app{name: "web", replicas: 3}
	var rss []*appsv1.ReplicaSet
	for i := 1; i <= 3; i++ {
		v := base.with(fmt.Sprintf("web-config-%d", i), fmt.Sprint(i))
		w.revision(v.configMap)
		w.deploy(v)
		rs := w.waitHealthy(v)
		w.waitOwned("ConfigMap", v.configMap, rs)
		rss = append(rss, rs)
	}
	w.plugin("undo", base.name, "--to-revision=1")
	v1 := base.with("web-config-1", "1")
	back := w.waitHealthy(v1)
	if back.UID != rss[0].UID {
		t.Fatalf("undo made ReplicaSet %s (%s), want the kept %s (%s)", back.Name, back.UID, rss[0].Name, rss[0].UID)
	}
	w.podsReady(back, v1, int(base.replicas))
	w.waitOwned("ConfigMap", v1.configMap, back)
	for i, rs := range rss {
		w.waitOwned("ConfigMap", fmt.Sprintf("web-config-%d", i+1), rs)
	}
	if n := len(w.replicaSets(base.name)); n != 3 {
		t.Fatalf("%d ReplicaSets after the undo, want the same 3", n)
	}
}

// Scenario 3. Spot replacements and a scale-up during a canary: new stable Pods get the
// stable revision, new canary Pods the canary's, and no Pod is ever created referencing
// a ConfigMap that does not exist (the guard checks every Pod at its creation).
func TestSpotReplacementAndScaleUpDuringCanary(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1", pause: true}
	v2 := v1.with("web-config-2", "2")
	w.revision(v1.configMap)
	w.deploy(v1)
	rs1 := w.waitHealthy(v1)
	w.revision(v2.configMap)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)

	for _, tc := range []struct {
		rs *appsv1.ReplicaSet
		v  app
	}{{rs1, v1}, {rs2, v2}} {
		p := w.replacePod(tc.rs)
		if !argorollouts.UsesConfigMap(p.Spec, tc.v.configMap) {
			t.Fatalf("replacement %s of %s uses %v, want %s", p.Name, tc.rs.Name, argorollouts.ConfigMapsOf(p.Spec), tc.v.configMap)
		}
		w.mustExist(tc.v.configMap)
	}

	w.scale(v1.name, 6)
	w.Eventually("the canary scaled up with the Rollout", func() error {
		c, s := w.get(rs2), w.get(rs1)
		if c.Status.ReadyReplicas != 3 || s.Status.ReadyReplicas != 3 {
			return fmt.Errorf("canary %d Ready, stable %d Ready, want 3 and 3", c.Status.ReadyReplicas, s.Status.ReadyReplicas)
		}
		return nil
	})
	w.podsReady(rs1, v1, 3)
	w.podsReady(rs2, v2, 3)
	w.waitOwned("ConfigMap", v1.configMap, rs1)
	w.waitOwned("ConfigMap", v2.configMap, rs2)

	w.plugin("promote", v1.name)
	v2.replicas = 6
	w.waitHealthy(v2)
	t.Logf("guard checked %d Pods, none referenced a missing ConfigMap", w.events.podsChecked())
}

// Scenario 4. A new revision while a canary is in progress: three ReplicaSets at once,
// each owning its own revision; the newest is promoted; revisionHistoryLimit 1 then
// keeps one old ReplicaSet, and exactly the revisions of the ReplicaSets left remain.
func TestNewRevisionDuringCanary(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	v1 := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1", history: ptr(int32(1)), pause: true}
	v2, v3 := v1.with("web-config-2", "2"), v1.with("web-config-3", "3")
	w.revision(v1.configMap)
	w.deploy(v1)
	rs1 := w.waitHealthy(v1)
	w.revision(v2.configMap)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.revision(v3.configMap)
	w.deploy(v3)
	rs3 := w.waitPaused(v3)
	if n := len(w.replicaSets(v1.name)); n != 3 {
		t.Fatalf("%d ReplicaSets during the second canary, want 3", n)
	}
	for _, tc := range []struct {
		cm string
		rs *appsv1.ReplicaSet
	}{{v1.configMap, rs1}, {v2.configMap, rs2}, {v3.configMap, rs3}} {
		w.waitOwned("ConfigMap", tc.cm, tc.rs)
		if got := w.owners(tc.cm); !slices.Equal(got, []string{string(tc.rs.UID)}) {
			t.Fatalf("%s owned by %v, want only %s", tc.cm, got, tc.rs.Name)
		}
	}
	w.plugin("promote", v1.name)
	w.waitHealthy(v3)
	w.Eventually("revisionHistoryLimit 1: two ReplicaSets and their revisions left", func() error {
		return w.revisionsMatchReplicaSets(v1.name, 2)
	})
	w.mustExist(v3.configMap)
}

// revisionsMatchReplicaSets checks that the app has n ReplicaSets and that the
// namespace's revisions are exactly the ConfigMaps those ReplicaSets use.
func (w *world) revisionsMatchReplicaSets(name string, n int) error {
	rss := w.replicaSets(name)
	used := map[string]bool{}
	for _, rs := range rss {
		for _, cm := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
			used[cm] = true
		}
	}
	have := w.Revisions()
	if len(rss) != n || len(have) != len(used) {
		return fmt.Errorf("%d ReplicaSets using %v; revisions %v", len(rss), keys(used), keys(have))
	}
	for cm := range used {
		if !have[cm] {
			return fmt.Errorf("revision %s used by a ReplicaSet is missing", cm)
		}
	}
	return nil
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// get re-reads rs.
func (w *world) get(rs *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	w.T.Helper()
	got, err := w.getErr(rs)
	if err != nil {
		w.T.Fatal(err)
	}
	return got
}

func (w *world) getErr(rs *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	return w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs.Name, metav1.GetOptions{})
}

// scale sets the Rollout's replicas, as `kubectl scale` would.
func (w *world) scale(name string, n int) {
	w.T.Helper()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Patch(w.Ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.T.Fatalf("scale %s: %v", name, err)
	}
}

// lag logs how long after the ReplicaSet's deletion its revision was deleted.
func (w *world) lag(rsKind, rs, cmKind, cm string) time.Duration {
	w.T.Helper()
	var d time.Duration
	w.Eventually("both deletions recorded", func() error {
		a, okA := w.events.deletedAt(rsKind, rs)
		b, okB := w.events.deletedAt(cmKind, cm)
		if !okA || !okB {
			return fmt.Errorf("%s deleted %t, %s deleted %t", rs, okA, cm, okB)
		}
		d = b.Sub(a)
		return nil
	})
	w.T.Logf("%s %s deleted %s after %s %s", cmKind, cm, d.Round(time.Millisecond), rsKind, rs)
	return d
}
