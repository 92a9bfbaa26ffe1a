package argocd_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestKindChangeKeepsTheSharedRevision: a Deployment migrated to a Rollout by changing
// its kind in Git (the same template, the same generated config). With PruneLast=true
// (docs/design.md, "GitOps with Argo CD") Argo CD prunes the Deployment only once the
// Rollout is Healthy; by then the Rollout's ReplicaSet owns the revision, so the garbage
// collector deletes the Deployment's ReplicaSet and keeps the revision: the same object
// (UID) throughout. Without it the create and the prune race, and the collector may
// delete the revision with the Deployment's ReplicaSet; then Argo CD creates it again
// (it is in Git) and the service attaches the new object: either way it ends owned by
// the Rollout's ReplicaSet, the Application Synced and Healthy (which way it went is
// reported).
func TestKindChangeKeepsTheSharedRevision(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pruneLast bool
	}{{"prune-last", true}, {"default", false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "migrate-"+tc.name[:5])
			w.ServeWatcher()
			app := argocd.App{Path: "web"}
			if tc.pruneLast {
				app.SyncOptions = []string{"PruneLast=true"}
			}
			kindChange(w, app, tc.pruneLast)
		})
	}
}

func kindChange(w *world, app argocd.App, sameObject bool) {
	t := w.T
	sha := w.commit("web as a Deployment", deploymentFiles("web"))
	w.createApp(app)
	w.waitHealthy(sha)
	rsD := w.deploymentReplicaSet("web")
	cm := argorollouts.ConfigMapsOf(rsD.Spec.Template.Spec)[0]
	w.waitOwned(cm, rsD)
	before, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, cm, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	sha = w.commit("web as a Rollout", webFiles("web", 1), "web/deployment.yaml")
	st := w.waitHealthy(sha)
	if slices.ContainsFunc(st.Pruned, func(p string) bool { return strings.HasPrefix(p, "ConfigMap/") }) {
		t.Fatalf("the kind change's sync pruned %v", st.Pruned)
	}
	now, rsR := w.current("web")
	if now != cm {
		t.Fatalf("the Rollout uses %s, the Deployment used %s", now, cm)
	}
	w.WaitGone("the Deployment's ReplicaSet "+rsD.Name, func() error {
		_, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rsD.Name, metav1.GetOptions{})
		return err
	})
	w.waitOwned(cm, rsR)
	w.waitHealthy(sha)
	after, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, cm, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("revision %s after the migration: %v", cm, err)
	}
	report(t.Name()+": the revision kept (same UID)", "%t", after.UID == before.UID)
	if sameObject && after.UID != before.UID {
		t.Fatalf("revision %s was deleted and created again (UID %s, now %s)", cm, before.UID, after.UID)
	}
}

// deploymentFiles is webFiles(dir, 1) with the workload a Deployment of the same
// template.
func deploymentFiles(dir string) map[string]string {
	files := webFiles(dir, 1)
	delete(files, dir+"/rollout.yaml")
	files[dir+"/kustomization.yaml"] = strings.Replace(files[dir+"/kustomization.yaml"], "  - rollout.yaml\n", "  - deployment.yaml\n", 1)
	d := strings.Replace(testfix.RolloutYAML, "apiVersion: argoproj.io/v1alpha1\nkind: Rollout\n", "apiVersion: apps/v1\nkind: Deployment\n", 1)
	files[dir+"/deployment.yaml"] = strings.Replace(d, "  strategy:\n    canary: {}\n", "", 1)
	return files
}

// deploymentReplicaSet returns the one ReplicaSet of Deployment name.
func (w *world) deploymentReplicaSet(name string) *appsv1.ReplicaSet {
	w.T.Helper()
	var rs *appsv1.ReplicaSet
	w.Eventually("the ReplicaSet of Deployment "+name, func() error {
		list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var found []*appsv1.ReplicaSet
		for i := range list.Items {
			if c := metav1.GetControllerOf(&list.Items[i]); c != nil && c.Kind == "Deployment" && c.Name == name {
				found = append(found, &list.Items[i])
			}
		}
		if len(found) != 1 {
			return fmt.Errorf("%d ReplicaSets of Deployment %s", len(found), name)
		}
		rs = found[0]
		return nil
	})
	return rs
}
