//go:build flux

package flux_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/flux"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/scenario"
)

// waitFor bounds every wait on Flux, the controllers or the service: a bound for a stuck
// test, not a timed assertion (the conditions usually hold within seconds).
const waitFor = 3 * time.Minute

// The GitRepository and Kustomization of every scenario are named after it; both poll
// every interval, and every commit also asks for a reconcile at once (flux.Reconcile).
const (
	ksName   = "web"
	interval = 30 * time.Second
)

// world is one scenario: its namespace, Git repository (served by the package's
// GitServer), GitRepository and Kustomization (prune: true), and a recorder of every
// revision deleted while a live ReplicaSet still used it.
type world struct {
	*scenario.World
	repo *argocd.Repo
	rec  *recorder
}

func newWorld(t *testing.T, name string) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	w := &world{World: scenario.New(t, c, name+"-"+rand.String(5), 12*time.Minute, waitFor,
		scenario.Logger(t.Name(), "FLUX_SERVICE_LOGS", testing.Verbose()))}
	w.CreateNamespace()
	var err error
	if w.repo, err = argocd.NewRepo(w.Ctx, filepath.Join(gitRoot, w.NS)); err != nil {
		t.Fatal(err)
	}
	w.rec = startRecorder(w)
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpState()
		}
	})
	return w
}

// start commits the first version and creates the GitRepository and Kustomization.
func (w *world) start(files map[string]string) string {
	w.T.Helper()
	sha := w.commit("config version 1", files)
	if err := fx.Create(w.Ctx, flux.GitRepository(w.NS, ksName, git.URL(w.NS), interval)); err != nil {
		w.T.Fatal(err)
	}
	if err := fx.Create(w.Ctx, flux.Kustomization(w.NS, ksName, ksName, "./web", w.NS, true, interval)); err != nil {
		w.T.Fatal(err)
	}
	return sha
}

// commit commits files and asks the GitRepository, then the Kustomization, to reconcile.
func (w *world) commit(msg string, files map[string]string) string {
	w.T.Helper()
	sha, err := w.repo.Commit(w.Ctx, msg, files)
	if err != nil {
		w.T.Fatal(err)
	}
	w.reconcile()
	return sha
}

// reconcile asks the GitRepository and the Kustomization for a reconcile now (once they
// exist), as `flux reconcile kustomization --with-source` does.
func (w *world) reconcile() {
	w.T.Helper()
	_, _ = fx.Reconcile(w.Ctx, flux.GitRepositoryGVR, w.NS, ksName)
	_, _ = fx.Reconcile(w.Ctx, flux.KustomizationGVR, w.NS, ksName)
}

// waitApplied waits until the Kustomization is Ready with sha applied, and returns its status.
func (w *world) waitApplied(sha string) flux.Status {
	w.T.Helper()
	var st flux.Status
	asked := time.Now()
	w.Eventually("the Kustomization Ready at "+sha[:8], func() error {
		ks, err := fx.Get(w.Ctx, flux.KustomizationGVR, w.NS, ksName)
		if err != nil {
			return err
		}
		st = flux.StatusOf(ks)
		if err := st.ReadyAt(sha); err != nil {
			if time.Since(asked) > 15*time.Second { // a request that came before the objects existed
				w.reconcile()
				asked = time.Now()
			}
			return err
		}
		return nil
	})
	return st
}

// current waits until the Rollout is healthy on a ReplicaSet using ConfigMap want, and
// returns that ReplicaSet.
func (w *world) current(want string) *appsv1.ReplicaSet {
	w.T.Helper()
	var rs *appsv1.ReplicaSet
	w.Eventually("the Rollout healthy on "+want, func() error {
		var err error
		if rs, err = argorollouts.CurrentReplicaSet(w.Ctx, w.Dynamic, w.Kube, w.NS, "web"); err != nil {
			return err
		}
		if cms := argorollouts.ConfigMapsOf(rs.Spec.Template.Spec); len(cms) != 1 || cms[0] != want {
			return fmt.Errorf("ReplicaSet %s uses %v", rs.Name, cms)
		}
		return nil
	})
	return rs
}

// revisionNames returns the names of the generated ConfigMaps of generator prefix (name-hash).
func (w *world) revisionNames(prefix string) []string {
	w.T.Helper()
	list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []string
	for _, cm := range list.Items {
		if strings.HasPrefix(cm.Name, prefix+"-") {
			out = append(out, cm.Name)
		}
	}
	sort.Strings(out)
	return out
}

// usedByLiveReplicaSets returns the ConfigMaps the namespace's live (not terminating)
// ReplicaSets use.
func (w *world) usedByLiveReplicaSets() []string {
	w.T.Helper()
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	set := map[string]bool{}
	for _, rs := range list.Items {
		if rs.DeletionTimestamp == nil {
			for _, cm := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
				set[cm] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for cm := range set {
		out = append(out, cm)
	}
	sort.Strings(out)
	return out
}

func (w *world) configMap(name string) *corev1.ConfigMap {
	w.T.Helper()
	cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
	if err != nil {
		w.T.Fatalf("ConfigMap %s: %v", name, err)
	}
	return cm
}

// dumpState logs the Kustomization, ReplicaSets, ConfigMaps and Flux logs of a failed test.
func (w *world) dumpState() {
	ctx := context.Background()
	if ks, err := fx.Get(ctx, flux.KustomizationGVR, w.NS, ksName); err == nil {
		w.T.Logf("Kustomization: %+v", flux.StatusOf(ks))
	}
	if list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range list.Items {
			w.T.Logf("ReplicaSet %s (%s): spec %d, uses %v", rs.Name, rs.UID, *rs.Spec.Replicas, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec))
		}
	}
	if list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, cm := range list.Items {
			w.T.Logf("ConfigMap %s owners %v annotations %v", cm.Name, cm.OwnerReferences, cm.Annotations)
		}
	}
	for _, p := range flux.Binaries {
		w.T.Logf("---- %s log ----\n%s", p, fx.LogTail(p, 30))
	}
}

// recorder watches the namespace's ConfigMaps; at every delete it reads the ReplicaSets
// live and records the revision as a violation when a live one (no deletionTimestamp)
// still uses it. Reading live after the delete event is conservative: a ReplicaSet live
// then was live when the revision was deleted.
type recorder struct {
	mu         sync.Mutex
	deleted    []string
	violations []string
}

func startRecorder(w *world) *recorder {
	r := &recorder{}
	f := informers.NewSharedInformerFactoryWithOptions(w.Kube, 0, informers.WithNamespace(w.NS))
	_, _ = f.Core().V1().ConfigMaps().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				r.deletedNow(w, cm.Name)
			}
		},
	})
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	w.T.Cleanup(func() { close(stop); f.Shutdown() })
	return r
}

func (r *recorder) deletedNow(w *world, name string) {
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(context.Background(), metav1.ListOptions{})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted = append(r.deleted, name)
	if err != nil {
		r.violations = append(r.violations, fmt.Sprintf("%s deleted; listing ReplicaSets failed: %v", name, err))
		return
	}
	for _, rs := range list.Items {
		for _, cm := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
			if cm == name && rs.DeletionTimestamp == nil {
				r.violations = append(r.violations, fmt.Sprintf("%s deleted while ReplicaSet %s uses it", name, rs.Name))
			}
		}
	}
}

// seen returns the revisions deleted so far and the violations.
func (r *recorder) seen() (deleted, violations []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.deleted...), append([]string(nil), r.violations...)
}

// ownedByManager reports whether the ConfigMap's managedFields give the annotation key
// to manager.
func ownedByManager(cm *corev1.ConfigMap, manager, key string) bool {
	for _, mf := range cm.ManagedFields {
		if mf.Manager == manager && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:`+key+`"`) {
			return true
		}
	}
	return false
}
