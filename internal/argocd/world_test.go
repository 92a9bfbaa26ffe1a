package argocd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// waitFor bounds every wait on Argo CD, the controllers or the service: a bound for a
// stuck test, not a timed assertion (the conditions usually hold within seconds).
const waitFor = 2 * time.Minute

// world is one scenario: its namespace, Git repository and Application, and a
// recorder of what happens to the namespace's ReplicaSets and ConfigMaps.
type world struct {
	t    *testing.T
	ctx  context.Context
	ns   string
	app  string
	kc   kubernetes.Interface
	dc   dynamic.Interface
	repo *argocd.Repo
	rec  *recorder
}

// newWorld creates a namespace (and waits for its default ServiceAccount) and a Git
// repository for the scenario.
func newWorld(t *testing.T, name string) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	timed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	t.Cleanup(cancel)
	dc, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, ns: name + "-" + rand.String(5), app: name, kc: c.Client(), dc: dc}
	if _, err := w.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	w.eventually("the namespace's default ServiceAccount", func() error {
		_, err := w.kc.CoreV1().ServiceAccounts(w.ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if w.repo, err = argocd.NewRepo(ctx, filepath.Join(t.TempDir(), "git")); err != nil {
		t.Fatal(err)
	}
	w.rec = startRecorder(t, w.kc, w.ns)
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpState()
		}
		_ = acd.Delete(context.Background(), w.app)
	})
	return w
}

func (w *world) eventually(what string, cond func() error) {
	w.t.Helper()
	controlplane.Eventually(w.t, waitFor, what, cond)
}

// serveWatcher runs configmap-attacher in-process for the namespace as `serve --watch`
// (the built-in ReplicaSet watcher and the revision side), until the test ends.
func (w *world) serveWatcher() *server.Server {
	w.t.Helper()
	return w.serve(server.Ingress{Watch: true})
}

// serve runs configmap-attacher in-process for the namespace with the ways in of in
// (beside gRPC, HTTP and the revision side, which always run), until the test ends.
func (w *world) serve(in server.Ingress) *server.Server {
	w.t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() && os.Getenv("ARGOCD_SERVICE_LOGS") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("test", w.t.Name())
	}
	srv, err := server.New(cp.RESTConfig(), server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Namespace: w.ns, Logger: log, ShutdownTimeout: 5 * time.Second, Ingress: in})
	if err != nil {
		w.t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	w.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("server.Run: %v", err)
		}
	})
	w.eventually("the service ready", func() error {
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %d", resp.StatusCode)
		}
		return nil
	})
	return srv
}

// createApp creates the scenario's Application from app (Name and Namespace filled in).
func (w *world) createApp(app argocd.App) {
	w.t.Helper()
	app.Name, app.Namespace, app.RepoURL = w.app, w.ns, w.repo.URL()
	if err := acd.Create(w.ctx, app.Object()); err != nil {
		w.t.Fatal(err)
	}
}

// commit commits files to the scenario's repository and asks Argo CD to refresh.
func (w *world) commit(msg string, files map[string]string, remove ...string) string {
	w.t.Helper()
	sha, err := w.repo.Commit(w.ctx, msg, files, remove...)
	if err != nil {
		w.t.Fatal(err)
	}
	if _, err := acd.Get(w.ctx, w.app); err == nil {
		if err := acd.Refresh(w.ctx, w.app); err != nil {
			w.t.Fatal(err)
		}
	}
	return sha
}

// status is the Application's status now.
func (w *world) status() (argocd.Status, error) {
	app, err := acd.Get(w.ctx, w.app)
	if err != nil {
		return argocd.Status{}, err
	}
	return argocd.StatusOf(app), nil
}

// waitHealthy waits until the app is Synced and Healthy at sha, and returns its status.
func (w *world) waitHealthy(sha string) argocd.Status {
	w.t.Helper()
	var st argocd.Status
	w.eventually("the Application Synced and Healthy at "+sha[:8], func() error {
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
	w.t.Helper()
	var cm string
	var rs *appsv1.ReplicaSet
	w.eventually("the Rollout's current ReplicaSet", func() error {
		ro, err := argorollouts.Get(w.ctx, w.dc, w.ns, rollout)
		if err != nil {
			return err
		}
		st := argorollouts.StatusOf(ro)
		if !st.Healthy() {
			return fmt.Errorf("rollout not healthy: %s", st)
		}
		list, err := w.kc.AppsV1().ReplicaSets(w.ns).List(w.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if argorollouts.Hash(&list.Items[i]) == st.CurrentPodHash {
				rs = &list.Items[i]
				if cms := argorollouts.ConfigMapsOf(rs.Spec.Template.Spec); len(cms) == 1 {
					cm = cms[0]
					return nil
				}
				return fmt.Errorf("ReplicaSet %s uses %v", rs.Name, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec))
			}
		}
		return fmt.Errorf("no ReplicaSet with hash %s", st.CurrentPodHash)
	})
	return cm, rs
}

// waitOwned waits until ConfigMap name has an ownerReference to rs.
func (w *world) waitOwned(name string, rs *appsv1.ReplicaSet) {
	w.t.Helper()
	w.eventually("ConfigMap "+name+" owned by ReplicaSet "+rs.Name, func() error {
		cm, err := w.kc.CoreV1().ConfigMaps(w.ns).Get(w.ctx, name, metav1.GetOptions{})
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
	w.t.Helper()
	cm, err := w.kc.CoreV1().ConfigMaps(w.ns).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatalf("revision %s: %v", name, err)
	}
	if !argorollouts.OwnedBy(cm, rs.UID) {
		w.t.Fatalf("revision %s is not owned by ReplicaSet %s: owners %v", name, rs.Name, cm.OwnerReferences)
	}
}

// waitGone waits until get answers NotFound.
func (w *world) waitGone(what string, get func() error) {
	w.t.Helper()
	w.eventually(what+" deleted", func() error {
		if err := get(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (err %v)", what, err)
		}
		return nil
	})
}

// revisions lists the namespace's opted-in ConfigMaps.
func (w *world) revisions() []string {
	w.t.Helper()
	list, err := w.kc.CoreV1().ConfigMaps(w.ns).List(w.ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name)
	}
	return out
}

// dumpState logs the Application, ReplicaSets, revisions and Argo CD logs of a failed test.
func (w *world) dumpState() {
	ctx := context.Background()
	if app, err := acd.Get(ctx, w.app); err == nil {
		w.t.Logf("Application %s: %s\nstatus %s", w.app, argocd.StatusOf(app), argocd.MarshalStatus(app))
	}
	if list, err := w.kc.AppsV1().ReplicaSets(w.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range list.Items {
			w.t.Logf("ReplicaSet %s (%s): spec %d, uses %v", rs.Name, rs.UID, *rs.Spec.Replicas, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec))
		}
	}
	if list, err := w.kc.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, cm := range list.Items {
			w.t.Logf("ConfigMap %s owners %v", cm.Name, cm.OwnerReferences)
		}
	}
	for _, p := range []string{"application-controller", "repo-server"} {
		w.t.Logf("---- %s log ----\n%s", p, acd.LogTail(p, 40))
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
