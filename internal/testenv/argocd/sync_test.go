package argocd_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// TestSyncKeepsRevisionsUntilTheirReplicaSetsGo is the GitOps promise under each way
// Argo CD applies and diffs: an app auto-synced with prune and selfHeal, its config
// from a Kustomize configMapGenerator and no Prune/compare annotations, gets three
// commits of new config. Each time the new revision is attached, the app is Synced and
// Healthy, the revision dropped from Git is not pruned while a ReplicaSet owns it, and
// it goes (garbage-collected) with that ReplicaSet.
func TestSyncKeepsRevisionsUntilTheirReplicaSetsGo(t *testing.T) {
	for _, tc := range applyModes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "sync-"+tc.name[:6])
			w.ServeWatcher()
			threeCommits(w, tc.app)
		})
	}
}

// threeCommits runs the three commits of new config and their checks; it returns the
// last commit's revision and ReplicaSet.
func threeCommits(w *world, app argocd.App) (string, *appsv1.ReplicaSet) {
	w.T.Helper()
	var names []string
	var owners []*appsv1.ReplicaSet
	for v := 1; v <= 3; v++ {
		if v >= 2 {
			w.pastCreationSecond(owners[v-2])
		}
		sha := w.commit("config version "+itoa(v), webFiles("web", v))
		if v == 1 {
			app.Path = "web"
			w.createApp(app)
		}
		st := w.waitHealthy(sha)
		if len(st.Pruned) > 0 {
			w.T.Fatalf("commit %d: the sync pruned %v", v, st.Pruned)
		}
		cm, rs := w.current("web")
		w.waitOwned(cm, rs)
		created, owned := w.rec.at("ConfigMap", cm)
		rsCreated, _ := w.rec.at("ReplicaSet", rs.Name)
		report(w.T.Name()+" commit "+itoa(v)+": revision created -> owned", "%s (ReplicaSet created -> owned %s)",
			owned.Sub(created).Round(ms), owned.Sub(rsCreated).Round(ms))
		names, owners = append(names, cm), append(owners, rs)
		if v >= 2 {
			if names[v-1] == names[v-2] {
				w.T.Fatalf("commit %d: the generated name did not change (%s)", v, cm)
			}
			// Dropped from Git by this commit and synced with prune: still here, owned.
			w.mustBeOwned(names[v-2], owners[v-2])
		}
	}
	// revisionHistoryLimit 1: the Rollouts controller deletes the first ReplicaSet once
	// the third is stable; the garbage collector then deletes the first revision.
	// Until then, the revision is never found gone while the ReplicaSet is still live
	// (looked up in that order: a revision gone before a live ReplicaSet is a violation).
	first, rs1 := names[0], owners[0]
	w.WaitGone("ReplicaSet "+rs1.Name, func() error {
		_, cmErr := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, first, metav1.GetOptions{})
		rs, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs1.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(cmErr) && err == nil && rs.DeletionTimestamp == nil {
			w.T.Fatalf("revision %s deleted while its ReplicaSet %s is live", first, rs1.Name)
		}
		return err
	})
	w.WaitGone("revision "+first, func() error {
		_, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, first, metav1.GetOptions{})
		return err
	})
	w.mustBeOwned(names[1], owners[1])
	if st, err := w.status(); err != nil || st.Sync != "Synced" || len(st.OutOfSync) > 0 {
		w.T.Fatalf("after the garbage collection: %s (%v)", st, err)
	}
	return names[2], owners[2]
}

// TestWithoutTheServiceArgoCDPrunesTheDroppedRevision is the control of the scenarios
// above: with no configmap-attacher, the revision a commit drops from Git is pruned by
// that commit's sync while its ReplicaSet still exists (the hazard the service removes),
// so their "not pruned" checks are not vacuous.
func TestWithoutTheServiceArgoCDPrunesTheDroppedRevision(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "control")
	sha := w.commit("config version 1", webFiles("web", 1))
	w.createApp(argocd.App{Path: "web"})
	w.waitHealthy(sha)
	first, rs1 := w.current("web")
	sha = w.commit("config version 2", webFiles("web", 2))
	w.waitHealthy(sha)
	// Nothing else deletes it here: no owner, no service (the last operation's result may
	// be a later selfHeal sync at the same commit, so it is not read for the prune).
	if _, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, first, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("revision %s: %v, want it pruned", first, err)
	}
	if _, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs1.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("its ReplicaSet %s: %v, want it kept in history", rs1.Name, err)
	}
}
