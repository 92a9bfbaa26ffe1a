//go:build flux

package flux_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/flux"
)

// TestFluxKeepsEveryRevisionALiveReplicaSetUses is the Flux promise: a Kustomization with
// prune: true, a configMapGenerator revision per commit and a Rollout using it, four
// commits, the service running (its watcher). Each commit's revision is attached and
// gets the prune guard (a separate write by the service's field manager); Flux applies
// it again without removing the guard (no write at all: its resourceVersion stays);
// each revision that Git drops leaves Flux's inventory but is not pruned while a
// ReplicaSet uses it; the unused generator's revision (never attached) is pruned by Flux
// at each commit. At no moment is a revision deleted while a live ReplicaSet uses it; the
// garbage collector deletes each with its last ReplicaSet; deleting the Kustomization
// leaves nothing behind.
func TestFluxKeepsEveryRevisionALiveReplicaSetUses(t *testing.T) {
	w := newWorld(t, "keep")
	w.ServeWatcher()
	var names []string
	for v := 1; v <= 4; v++ {
		var sha string
		if v == 1 {
			sha = w.start(webFiles(v))
		} else {
			sha = w.commit(fmt.Sprintf("config version %d", v), webFiles(v))
		}
		st := w.waitApplied(sha)
		cm, spare := w.applied(st)
		rs := w.current(cm)
		w.waitGuarded(cm, rs)
		w.fluxApplyKeepsGuard(cm)
		if got := w.configMap(spare); len(got.OwnerReferences) > 0 || got.Annotations[core.FluxPruneKey] != "" {
			t.Fatalf("commit %d: unused revision %s was touched: owners %v annotations %v", v, spare, got.OwnerReferences, got.Annotations)
		}
		if v >= 2 {
			prev := names[len(names)-1]
			if prev == cm {
				t.Fatalf("commit %d: the generated name did not change (%s)", v, cm)
			}
			if st.InventoryHas(w.NS, prev, "ConfigMap") {
				t.Fatalf("commit %d: %s still in Flux's inventory", v, prev)
			}
			w.mustKeepUsed(v)
			if got := w.revisionNames("spare-config"); !slices.Equal(got, []string{spare}) {
				t.Fatalf("commit %d: unused revisions %v, want only %s (Flux prunes the one Git dropped)", v, got, spare)
			}
		}
		names = append(names, cm)
	}
	// revisionHistoryLimit 1: the Rollouts controller deletes the older ReplicaSets; the
	// garbage collector deletes their revisions, and only those.
	w.Eventually("exactly the revisions live ReplicaSets use left", func() error {
		if got, used := w.revisionNames("web-config"), w.usedByLiveReplicaSets(); !slices.Equal(got, used) {
			return fmt.Errorf("revisions %v, used by live ReplicaSets %v", got, used)
		}
		return nil
	})
	w.deleteKustomizationLeavesNothing()
	deleted, violations := w.rec.seen()
	if len(violations) > 0 {
		t.Fatalf("revisions deleted while a live ReplicaSet used them: %v", violations)
	}
	for _, n := range names {
		if !slices.Contains(deleted, n) {
			t.Fatalf("revision %s never seen deleted (deleted: %v)", n, deleted)
		}
	}
	t.Logf("revisions %v, deleted in order %v", names, deleted)
}

// TestWithoutTheServiceFluxPrunesTheRevisionALiveReplicaSetUses is the control: the same
// Kustomization and Rollout with no configmap-attacher; the commit that drops the first
// revision from Git prunes it while its ReplicaSet is still live (kept in history), so the
// scenario above proves something.
func TestWithoutTheServiceFluxPrunesTheRevisionALiveReplicaSetUses(t *testing.T) {
	w := newWorld(t, "control")
	st := w.waitApplied(w.start(webFiles(1)))
	first, _ := w.applied(st)
	rs1 := w.current(first)
	w.waitApplied(w.commit("config version 2", webFiles(2)))
	if _, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, first, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("revision %s: %v, want it pruned by Flux", first, err)
	}
	if _, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs1.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("its ReplicaSet %s: %v, want it kept in history", rs1.Name, err)
	}
	if _, violations := w.rec.seen(); len(violations) == 0 {
		t.Fatalf("the recorder saw no revision deleted under a live ReplicaSet")
	}
}

// applied returns the web-config and spare-config revisions the Kustomization applied.
func (w *world) applied(st flux.Status) (cm, spare string) {
	w.T.Helper()
	cms, spares := st.InventoryNames(w.NS, "ConfigMap", "web-config-"), st.InventoryNames(w.NS, "ConfigMap", "spare-config-")
	if len(cms) != 1 || len(spares) != 1 {
		w.T.Fatalf("inventory %v: want one web-config and one spare-config revision", st.Inventory)
	}
	return cms[0], spares[0]
}

// waitGuarded waits until ConfigMap name is owned by rs and carries the prune guard,
// written by the service's field manager.
func (w *world) waitGuarded(name string, rs *appsv1.ReplicaSet) {
	w.T.Helper()
	w.Eventually("ConfigMap "+name+" owned by "+rs.Name+" and guarded", func() error {
		cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !argorollouts.OwnedBy(cm, rs.UID) || cm.Annotations[core.FluxPruneKey] != core.FluxPruneDisabled {
			return fmt.Errorf("owners %v annotations %v", cm.OwnerReferences, cm.Annotations)
		}
		if !ownedByManager(cm, core.FieldManager, core.FluxPruneKey) {
			return fmt.Errorf("annotation %s not in %s's managed fields: %v", core.FluxPruneKey, core.FieldManager, cm.ManagedFields)
		}
		return nil
	})
}

// fluxApplyKeepsGuard asks Flux for one more reconcile of the same commit and checks that
// its server-side apply left the guarded revision alone: same resourceVersion, guard and
// owners in place (another manager's fields: no conflict, no removal, no fight).
func (w *world) fluxApplyKeepsGuard(name string) {
	w.T.Helper()
	before := w.configMap(name)
	token, err := fx.Reconcile(w.Ctx, flux.KustomizationGVR, w.NS, ksName)
	if err != nil {
		w.T.Fatal(err)
	}
	w.Eventually("Flux's reconcile "+token, func() error {
		ks, err := fx.Get(w.Ctx, flux.KustomizationGVR, w.NS, ksName)
		if err != nil {
			return err
		}
		if st := flux.StatusOf(ks); st.HandledReconcile != token || st.Ready != "True" {
			return fmt.Errorf("handled %q, ready %s: %s", st.HandledReconcile, st.Ready, st.Message)
		}
		return nil
	})
	after := w.configMap(name)
	if after.ResourceVersion != before.ResourceVersion || after.Annotations[core.FluxPruneKey] != core.FluxPruneDisabled ||
		len(after.OwnerReferences) != len(before.OwnerReferences) {
		w.T.Fatalf("Flux's apply changed %s: resourceVersion %s -> %s, annotations %v, owners %v",
			name, before.ResourceVersion, after.ResourceVersion, after.Annotations, after.OwnerReferences)
	}
}

// mustKeepUsed fails unless every revision a live ReplicaSet uses exists, owned by every
// such ReplicaSet.
func (w *world) mustKeepUsed(v int) {
	w.T.Helper()
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	for _, rs := range list.Items {
		if rs.DeletionTimestamp != nil {
			continue
		}
		for _, name := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
			cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
			if err != nil {
				w.T.Fatalf("commit %d: revision %s of live ReplicaSet %s: %v", v, name, rs.Name, err)
			}
			if !argorollouts.OwnedBy(cm, rs.UID) {
				w.T.Fatalf("commit %d: revision %s not owned by its ReplicaSet %s: %v", v, name, rs.Name, cm.OwnerReferences)
			}
		}
	}
}

// deleteKustomizationLeavesNothing deletes the Kustomization: Flux deletes its inventory
// (the Rollout, the unused revision) and skips the guarded revision; the garbage
// collector deletes the ReplicaSets and then their revisions. Nothing is left.
func (w *world) deleteKustomizationLeavesNothing() {
	w.T.Helper()
	if err := fx.Delete(w.Ctx, flux.KustomizationGVR, w.NS, ksName); err != nil {
		w.T.Fatal(err)
	}
	w.WaitGone("the Kustomization", func() error {
		_, err := fx.Get(w.Ctx, flux.KustomizationGVR, w.NS, ksName)
		return err
	})
	w.Eventually("no ReplicaSet and no revision left", func() error {
		rss, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		left := append(w.revisionNames("web-config"), w.revisionNames("spare-config")...)
		if len(rss.Items) > 0 || len(left) > 0 {
			return fmt.Errorf("%d ReplicaSets, revisions %v", len(rss.Items), left)
		}
		return nil
	})
}
