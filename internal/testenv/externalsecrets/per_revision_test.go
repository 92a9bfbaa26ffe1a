package externalsecrets_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// The pattern the README recommends: one ExternalSecret per revision, its name hashed
// (as Kustomize or a Helm checksum makes it), spec.target.name unset. Through a canary
// on the real Argo Rollouts controller, an abort and an undo, every Secret a live
// ReplicaSet uses exists; the previous ExternalSecret pruned (as Argo CD does when Git
// drops it) leaves its Secret to the ReplicaSets; once neither is left the Secret goes.
func TestOneExternalSecretPerRevisionThroughCanaryAbortAndUndo(t *testing.T) {
	needWorkloads(t)
	w := newWorld(t, map[string]string{"/web/password": "p"})
	keys := map[string]string{"password": "/web/password"}
	const v1, v2 = "web-secret-1a2b3", "web-secret-4c5d6"

	// Release 1.
	w.externalSecret(v1, "", keys)
	w.createRollout("web", v1, true)
	rs1 := w.replicaSetUsing("web", v1)
	w.waitRollout("web", "healthy", argorollouts.Status.Healthy)
	es1, err := w.getExternalSecret(v1)
	if err != nil {
		t.Fatal(err)
	}
	w.waitOwners(v1, rs1.UID, es1.GetUID())

	// Release 2: its ExternalSecret and template applied, release 1's ExternalSecret pruned.
	w.externalSecret(v2, "", keys)
	if err := argorollouts.SetTemplate(w.Ctx, w.Dynamic, w.NS, "web", podTemplate("web", v2)); err != nil {
		t.Fatal(err)
	}
	w.deleteExternalSecret(v1)
	rs2 := w.replicaSetUsing("web", v2)
	w.waitRollout("web", "paused at the canary step", func(s argorollouts.Status) bool { return s.Paused })
	w.waitSynced(v2)
	es2, err := w.getExternalSecret(v2)
	if err != nil {
		t.Fatal(err)
	}
	w.waitOwners(v2, rs2.UID, es2.GetUID())
	w.waitOwnedOnlyBy(v1, rs1.UID)

	// Abort: the stable ReplicaSet back to full size, the canary scaled down; both Secrets kept.
	if err := argorollouts.Abort(w.Ctx, w.Dynamic, w.NS, "web"); err != nil {
		t.Fatal(err)
	}
	w.waitRollout("web", "aborted", func(s argorollouts.Status) bool { return s.Aborted && s.StableRS == argorollouts.Hash(rs1) })
	w.waitOwners(v1, rs1.UID)
	w.waitOwners(v2, rs2.UID)

	// Undo to release 1 (its ReplicaSet reused): release 2's ReplicaSet goes
	// (revisionHistoryLimit 0), its Secret stays with its ExternalSecret.
	if err := argorollouts.Undo(w.Ctx, w.Dynamic, rs1, "web"); err != nil {
		t.Fatal(err)
	}
	w.waitRollout("web", "healthy on release 1", func(s argorollouts.Status) bool {
		return s.Healthy() && s.StableRS == argorollouts.Hash(rs1)
	})
	w.WaitGone("ReplicaSet "+rs2.Name, func() error {
		_, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs2.Name, metav1.GetOptions{})
		return err
	})
	w.waitOwnedOnlyBy(v2, es2.GetUID())
	w.waitOwners(v1, rs1.UID)

	// Git drops release 2's ExternalSecret: its Secret goes, release 1's is all that is left.
	w.deleteExternalSecret(v2)
	w.WaitGone("Secret "+v2, func() error { _, err := w.secret(v2); return err })
	list, err := w.Kube.CoreV1().Secrets(w.NS).List(w.Ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != v1 {
		t.Fatalf("revision Secrets left: %v, want only %s", names(list.Items), v1)
	}
	if errs := esoErrors(w.NS); len(errs) > 0 {
		t.Fatalf("ESO logged errors: %v", errs)
	}
}

// waitOwnedOnlyBy waits until Secret name is owned by exactly uids (the garbage
// collector dropped the references to owners that are gone).
func (w *world) waitOwnedOnlyBy(name string, uids ...types.UID) {
	w.T.Helper()
	w.Eventually(fmt.Sprintf("Secret %s owned only by %v", name, uids), func() error {
		s, err := w.secret(name)
		if err != nil {
			return err
		}
		return ownersAre(s, uids...)
	})
}

func names(items []corev1.Secret) []string {
	var out []string
	for _, s := range items {
		out = append(out, s.Name)
	}
	return out
}
