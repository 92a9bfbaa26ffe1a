package argocd_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/scenario"
)

// waitFor bounds every wait on Argo CD, the controllers or the service: a bound for a
// stuck test, not a timed assertion (the conditions usually hold within seconds).
const waitFor = 2 * time.Minute

// world is one scenario (scenario.World): its namespace, Git repository and
// Application, and a recorder of what happens to the namespace's ReplicaSets and
// ConfigMaps.
type world struct {
	*scenario.World
	app  string
	repo *argocd.Repo
	rec  *recorder
}

// newWorld creates a namespace (and waits for its default ServiceAccount) and a Git
// repository for the scenario.
func newWorld(t *testing.T, name string) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	timed(t)
	w := &world{World: scenario.New(t, c, name+"-"+rand.String(5), 8*time.Minute, waitFor,
		scenario.Logger(t.Name(), "ARGOCD_SERVICE_LOGS", testing.Verbose())), app: name}
	w.CreateNamespace()
	var err error
	if w.repo, err = argocd.NewRepo(w.Ctx, filepath.Join(t.TempDir(), "git")); err != nil {
		t.Fatal(err)
	}
	w.rec = startRecorder(t, w.Kube, w.NS)
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpState()
		}
		_ = acd.Delete(context.Background(), w.app)
	})
	return w
}

// createApp creates the scenario's Application from app (Name and Namespace filled in).
func (w *world) createApp(app argocd.App) {
	w.T.Helper()
	app.Name, app.Namespace, app.RepoURL = w.app, w.NS, w.repo.URL()
	if err := acd.Create(w.Ctx, app.Object()); err != nil {
		w.T.Fatal(err)
	}
}

// commit commits files to the scenario's repository and asks Argo CD to refresh.
func (w *world) commit(msg string, files map[string]string, remove ...string) string {
	w.T.Helper()
	sha, err := w.repo.Commit(w.Ctx, msg, files, remove...)
	if err != nil {
		w.T.Fatal(err)
	}
	if _, err := acd.Get(w.Ctx, w.app); err == nil {
		if err := acd.Refresh(w.Ctx, w.app); err != nil {
			w.T.Fatal(err)
		}
	}
	return sha
}

// status is the Application's status now.
func (w *world) status() (argocd.Status, error) {
	app, err := acd.Get(w.Ctx, w.app)
	if err != nil {
		return argocd.Status{}, err
	}
	return argocd.StatusOf(app), nil
}

// waitHealthy waits until the app is Synced and Healthy at sha, and returns its status.
func (w *world) waitHealthy(sha string) argocd.Status {
	w.T.Helper()
	var st argocd.Status
	w.Eventually("the Application Synced and Healthy at "+sha[:8], func() error {
		var err error
		if st, err = w.status(); err != nil {
			return err
		}
		return st.HealthyAt(sha)
	})
	return st
}

// current is the live Rollout's ConfigMap and the ReplicaSet of its current template.
func (w *world) current(rollout string) (string, *appsv1.ReplicaSet) {
	w.T.Helper()
	var cm string
	var rs *appsv1.ReplicaSet
	w.Eventually("the Rollout's current ReplicaSet", func() error {
		var err error
		if rs, err = argorollouts.CurrentReplicaSet(w.Ctx, w.Dynamic, w.Kube, w.NS, rollout); err != nil {
			return err
		}
		if cms := argorollouts.ConfigMapsOf(rs.Spec.Template.Spec); len(cms) == 1 {
			cm = cms[0]
			return nil
		}
		return fmt.Errorf("ReplicaSet %s uses %v", rs.Name, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec))
	})
	return cm, rs
}

// pastCreationSecond waits until the clock is past the second rs was created in, so the
// next ReplicaSet's creationTimestamp (second precision) is later. The Rollouts controller
// deletes the ReplicaSets past revisionHistoryLimit oldest first, ties broken by name:
// two created in one second (a fast machine) could make it delete the newer one.
func (w *world) pastCreationSecond(rs *appsv1.ReplicaSet) {
	time.Sleep(time.Until(rs.CreationTimestamp.Add(time.Second)))
}

// waitOwned waits until ConfigMap name has an ownerReference to rs.
func (w *world) waitOwned(name string, rs *appsv1.ReplicaSet) {
	w.T.Helper()
	w.Eventually("ConfigMap "+name+" owned by ReplicaSet "+rs.Name, func() error {
		cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !argorollouts.OwnedBy(cm, rs.UID) {
			return fmt.Errorf("owners %v", cm.OwnerReferences)
		}
		return nil
	})
}

// mustBeOwned fails unless ConfigMap name exists with an ownerReference to rs.
func (w *world) mustBeOwned(name string, rs *appsv1.ReplicaSet) {
	w.T.Helper()
	cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
	if err != nil {
		_, rsErr := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs.Name, metav1.GetOptions{})
		w.T.Fatalf("revision %s: %v (its ReplicaSet %s: %v)", name, err, rs.Name, errOrLive(rsErr))
	}
	if !argorollouts.OwnedBy(cm, rs.UID) {
		w.T.Fatalf("revision %s is not owned by ReplicaSet %s: owners %v", name, rs.Name, cm.OwnerReferences)
	}
}

// errOrLive says "live" for a nil error.
func errOrLive(err error) any {
	if err == nil {
		return "live"
	}
	return err
}

// dumpState logs the Application, ReplicaSets, revisions and Argo CD logs of a failed test.
func (w *world) dumpState() {
	ctx := context.Background()
	if app, err := acd.Get(ctx, w.app); err == nil {
		w.T.Logf("Application %s: %s\nstatus %s", w.app, argocd.StatusOf(app), argocd.MarshalStatus(app))
	}
	if list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range list.Items {
			w.T.Logf("ReplicaSet %s (%s): spec %d, uses %v", rs.Name, rs.UID, *rs.Spec.Replicas, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec))
		}
	}
	if list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, cm := range list.Items {
			w.T.Logf("ConfigMap %s owners %v", cm.Name, cm.OwnerReferences)
		}
	}
	for _, p := range []string{"application-controller", "repo-server"} {
		w.T.Logf("---- %s log ----\n%s", p, acd.LogTail(p, 40))
	}
}

// recorder watches one namespace's ReplicaSets and ConfigMaps and records when each
// was seen created, first owned, and how often it lost every owner.
type recorder struct {
	mu      sync.Mutex
	created map[string]time.Time // "ReplicaSet/name", "ConfigMap/name"
	owned   map[string]time.Time // ConfigMap name -> first seen with an owner
	dropped map[string]int       // ConfigMap name -> times seen losing every owner
}

func startRecorder(t *testing.T, kc kubernetes.Interface, ns string) *recorder {
	r := &recorder{created: map[string]time.Time{}, owned: map[string]time.Time{}, dropped: map[string]int{}}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	handler := func(kind string) toolscache.ResourceEventHandlerFuncs {
		return toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.seen(kind, nil, obj.(metav1.Object)) },
			UpdateFunc: func(old, obj any) { r.seen(kind, old.(metav1.Object), obj.(metav1.Object)) },
		}
	}
	_, _ = f.Apps().V1().ReplicaSets().Informer().AddEventHandler(handler("ReplicaSet"))
	_, _ = f.Core().V1().ConfigMaps().Informer().AddEventHandler(handler("ConfigMap"))
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	t.Cleanup(func() { close(stop); f.Shutdown() })
	return r
}

func (r *recorder) seen(kind string, old, obj metav1.Object) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	key := kind + "/" + obj.GetName()
	if old == nil {
		r.created[key] = now
	}
	if kind != "ConfigMap" {
		return
	}
	if _, ok := r.owned[obj.GetName()]; !ok && len(obj.GetOwnerReferences()) > 0 {
		r.owned[obj.GetName()] = now
	}
	if old != nil && len(old.GetOwnerReferences()) > 0 && len(obj.GetOwnerReferences()) == 0 {
		r.dropped[obj.GetName()]++
	}
}

// at returns when kind/name was seen created, and (for a ConfigMap) first owned.
func (r *recorder) at(kind, name string) (created, owned time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.created[kind+"/"+name], r.owned[name]
}

// droppedOwners is how often ConfigMap name was seen losing every owner.
func (r *recorder) droppedOwners(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped[name]
}
