package argocd_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// The Git URLs the shipped Applications name, rewritten to the local repository.
const (
	projectRepo = "https://github.com/configmap-attacher/configmap-attacher.git"
	exampleRepo = "https://github.com/example/shop-config.git"
)

// shipped are the folders of this repository the app-of-apps syncs from.
var shipped = []string{"deploy/argocd", "deploy/helm", "deploy/argo-events", "eventsource", "sensor"}

// TestAppOfAppsSyncsTheChartAndTheArgoEventsObjects: deploy/argocd's app-of-apps,
// synced by the real Argo CD from a Git repository holding this repository's deploy
// files (the repoURLs rewritten to it, and the example workload's repository stood in
// for by a Kustomize app in the same repository), creates every child Application; each
// syncs with no diff (the project's own chart under Argo CD's Helm rendering, the Argo
// Events objects, the example Rollout) and stays Synced on a new refresh, and every
// resource is Healthy (the service's Deployment Available with its two Pods) but those
// waiting for a controller not run here. kwok runs no containers: "deploys" means the
// objects exist and the Pods are Ready, not that the service's image ran.
func TestAppOfAppsSyncsTheChartAndTheArgoEventsObjects(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "configmap-attacher-root")
	files := shippedFiles(t, w.repo.URL())
	for k, v := range webFiles("web/overlays/production", 1) {
		files[k] = v
	}
	sha := w.commit("the project's deploy files", files)
	// The shipped Applications pin the release's tag (v + VERSION), as a release makes it.
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.repo.Tag(w.Ctx, "v"+strings.TrimSpace(string(version))); err != nil {
		t.Fatal(err)
	}
	rootApp := readApp(t, filepath.Join(w.repo.Dir(), "deploy/argocd/app-of-apps.yaml"))
	if err := acd.Create(w.Ctx, rootApp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acd.Delete(context.Background(), rootApp.GetName()) })
	apps := []string{"configmap-attacher-root", "configmap-attacher-argo-events", "configmap-attacher", "shop-web"}
	for _, name := range apps {
		w.waitAppSynced(name, sha)
	}
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "configmap-attacher", "configmap-attacher"},
		{schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "eventbus"}, "argo-events", "default"},
		{schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "eventsources"}, "argo-events", "configmap-attacher"},
		{schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "sensors"}, "argo-events", "configmap-attacher"},
		{schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}, "shop", "web"},
	} {
		if _, err := w.Dynamic.Resource(o.gvr).Namespace(o.ns).Get(w.Ctx, o.name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s/%s: %v", o.gvr.Resource, o.ns, o.name, err)
		}
	}
	// No drift: a new refresh compares again and finds nothing to sync.
	for _, name := range apps {
		if err := acd.Refresh(w.Ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range apps {
		w.waitAppSynced(name, sha)
		w.Eventually("every resource of "+name+" Healthy but those waiting for a controller not run here", func() error {
			app, err := acd.Get(w.Ctx, name)
			if err != nil {
				return err
			}
			st := argocd.StatusOf(app)
			for _, r := range st.NotHealthy {
				if kind, _, _ := strings.Cut(r, ":"); !slices.Contains(noController[name], kind) {
					return fmt.Errorf("%s: %s", name, r)
				}
			}
			report(t.Name()+": "+name, "sync %s, health %s %v", st.Sync, st.Health, st.NotHealthy)
			return nil
		})
	}
}

// noController are the resources whose health waits for a controller the local control
// plane does not run: the disruption controller (a PodDisruptionBudget's status) and the
// Argo Events controller (the EventBus's).
var noController = map[string][]string{
	"configmap-attacher":             {"PodDisruptionBudget/configmap-attacher"},
	"configmap-attacher-argo-events": {"EventBus/default"},
}

// waitAppSynced waits until Application name is Synced at sha with nothing out of sync
// and no refresh pending.
func (w *world) waitAppSynced(name, sha string) {
	w.T.Helper()
	w.Eventually("Application "+name+" Synced at "+sha[:8], func() error {
		app, err := acd.Get(w.Ctx, name)
		if err != nil {
			return err
		}
		if _, pending := app.GetAnnotations()["argocd.argoproj.io/refresh"]; pending {
			return fmt.Errorf("refresh pending")
		}
		return argocd.StatusOf(app).SyncedAt(sha)
	})
}

// shippedFiles reads the shipped folders, with the Applications' repoURLs pointed at url.
func shippedFiles(t *testing.T, url string) map[string]string {
	t.Helper()
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for _, dir := range shipped {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, ".go") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			s := strings.ReplaceAll(string(data), projectRepo, url)
			files[rel] = strings.ReplaceAll(s, exampleRepo, url)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func readApp(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &unstructured.Unstructured{Object: m}
}
