package argocd_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// TestDeletingTheApplicationLeavesNoRevision: an Application with the resources
// finalizer, two commits (two ReplicaSets, two attached revisions, one of them no longer
// in Git), then the Application is deleted. Argo CD deletes what it manages; once the
// ReplicaSets are gone no revision is left in the namespace.
func TestDeletingTheApplicationLeavesNoRevision(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "delete")
	w.ServeWatcher()
	var revs []string
	for v := 1; v <= 2; v++ {
		sha := w.commit("config version "+itoa(v), webFiles("web", v))
		if v == 1 {
			w.createApp(argocd.App{Path: "web", Finalizer: true})
		}
		w.waitHealthy(sha)
		cm, rs := w.current("web")
		w.waitOwned(cm, rs)
		revs = append(revs, cm)
	}
	if got := w.Revisions(); len(got) != 2 {
		t.Fatalf("revisions before the delete: %v, want %v", got, revs)
	}
	if err := acd.Delete(w.Ctx, w.app); err != nil {
		t.Fatal(err)
	}
	w.WaitGone("Application "+w.app, func() error { _, err := acd.Get(w.Ctx, w.app); return err })
	w.Eventually("no ReplicaSet and no revision left", func() error {
		rss, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		cms, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(w.Ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
		if err != nil {
			return err
		}
		if len(rss.Items)+len(cms.Items) > 0 {
			return fmt.Errorf("%d ReplicaSets and %d revisions left", len(rss.Items), len(cms.Items))
		}
		return nil
	})
}
