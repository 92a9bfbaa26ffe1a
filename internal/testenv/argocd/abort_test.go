package argocd_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestPrunedStableRevisionSurvivesTheCanaryAbortAndTheRevert is the canary-abort
// hazard of Argo Rollouts users (the stable Pods come back with the config the canary's
// commit removed) under an auto-synced Argo CD with prune and selfHeal: commit 2 starts
// a canary paused at 50% and drops the stable revision from Git; its sync prunes
// nothing (the stable ReplicaSet owns the revision). The canary is aborted: the stable
// ReplicaSet scales back up and its revision is there. Git is reverted to commit 1's
// config (the same generated name): Argo CD applies the attached revision without a
// diff, the Rollout is Healthy on the stable ReplicaSet, and the aborted canary's
// revision, no longer in Git, stays with its ReplicaSet (kept in history).
func TestPrunedStableRevisionSurvivesTheCanaryAbortAndTheRevert(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "abort")
	w.ServeWatcher()
	sha := w.commit("config version 1", canaryFiles("web", 1))
	w.createApp(argocd.App{Path: "web"})
	w.waitHealthy(sha)
	cm1, rs1 := w.current("web")
	w.waitOwned(cm1, rs1)

	sha = w.commit("config version 2", canaryFiles("web", 2))
	rs2 := w.waitCanaryPaused(sha, rs1)
	cm2 := argorollouts.ConfigMapsOf(rs2.Spec.Template.Spec)[0]
	w.waitOwned(cm2, rs2)
	w.mustBeOwned(cm1, rs1)

	if err := argorollouts.Abort(w.Ctx, w.Dynamic, w.NS, "web"); err != nil {
		t.Fatal(err)
	}
	w.Eventually("the abort: the canary at 0, the stable ReplicaSet back to 2 Ready", func() error {
		c, s := w.replicaSet(rs2.Name), w.replicaSet(rs1.Name)
		if c.Status.Replicas != 0 || s.Status.ReadyReplicas != 2 {
			return fmt.Errorf("canary %d Pods, stable %d Ready", c.Status.Replicas, s.Status.ReadyReplicas)
		}
		return nil
	})
	w.mustBeOwned(cm1, rs1)
	w.mustBeOwned(cm2, rs2)

	sha = w.commit("revert to config version 1", canaryFiles("web", 1))
	st := w.waitHealthy(sha)
	if len(st.Pruned) > 0 {
		t.Fatalf("the revert's sync pruned %v", st.Pruned)
	}
	if cm, rs := w.current("web"); cm != cm1 || rs.UID != rs1.UID {
		t.Fatalf("after the revert the Rollout runs %s on %s, want %s on %s", cm, rs.Name, cm1, rs1.Name)
	}
	w.mustBeOwned(cm1, rs1)
	w.mustBeOwned(cm2, rs2)
}

// canaryFiles is webFiles with two replicas and canary steps: 50%, then an indefinite
// pause.
func canaryFiles(dir string, v int) map[string]string {
	files := webFiles(dir, v)
	ro := strings.Replace(testfix.RolloutYAML, "  replicas: 1\n", "  replicas: 2\n", 1)
	ro = strings.Replace(ro, "    canary: {}\n", "    canary:\n      steps:\n        - setWeight: 50\n        - pause: {}\n", 1)
	files[dir+"/rollout.yaml"] = ro
	return files
}

// waitCanaryPaused waits until the Application has synced commit sha with nothing pruned
// and the Rollout's canary is paused with its Pod available; it returns the canary
// ReplicaSet.
func (w *world) waitCanaryPaused(sha string, stable *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	w.T.Helper()
	var canary *appsv1.ReplicaSet
	w.Eventually("commit "+sha[:8]+" synced, its canary paused", func() error {
		st, err := w.status()
		if err != nil {
			return err
		}
		if err := st.SyncedAt(sha); err != nil {
			return err
		}
		if len(st.Pruned) > 0 {
			w.T.Fatalf("the sync of %.8s pruned %v", sha, st.Pruned)
		}
		ro, err := argorollouts.Get(w.Ctx, w.Dynamic, w.NS, "web")
		if err != nil {
			return err
		}
		rst := argorollouts.StatusOf(ro)
		list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			rs := &list.Items[i]
			if rs.UID != stable.UID && argorollouts.Hash(rs) == rst.CurrentPodHash && rst.Paused && rs.Status.AvailableReplicas == 1 {
				canary = rs
				return nil
			}
		}
		return fmt.Errorf("rollout %s", rst)
	})
	return canary
}

// replicaSet reads the ReplicaSet name.
func (w *world) replicaSet(name string) *appsv1.ReplicaSet {
	w.T.Helper()
	rs, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	return rs
}
