package acceptance_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"strings"
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

	"github.com/configmap-attacher/configmap-attacher/internal/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// waitFor bounds every wait on the controllers or the service. It is a bound for a
// stuck test, not a timed assertion: the conditions usually hold within seconds.
const waitFor = 90 * time.Second

// world is one scenario's namespace on the shared control plane, with a guard that
// checks every Pod created in it.
type world struct {
	t   *testing.T
	ctx context.Context
	ns  string
	kc  kubernetes.Interface
	dc  dynamic.Interface
	log *slog.Logger
	// events records when ReplicaSets, ConfigMaps and Secrets of the namespace were
	// deleted, and every Pod that was created referencing a missing ConfigMap or Secret.
	events *recorder
}

// newWorld creates a fresh namespace (and waits for its default ServiceAccount).
func newWorld(t *testing.T) *world {
	w := newBareWorld(t)
	if _, err := w.kc.CoreV1().Namespaces().Create(w.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	w.eventually("the namespace's default ServiceAccount", func() error {
		_, err := w.kc.CoreV1().ServiceAccounts(w.ns).Get(w.ctx, "default", metav1.GetOptions{})
		return err
	})
	return w
}

// newBareWorld picks a namespace name and starts the guard, without creating the
// namespace (for a test whose player creates it).
func newBareWorld(t *testing.T) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	timed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	dc, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, ns: "acc-" + rand.String(6), kc: c.Client(), dc: dc, log: testLogger(t)}
	w.events = startRecorder(t, ctx, w.kc, w.ns)
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpState()
		}
	})
	return w
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() && os.Getenv("ACCEPTANCE_SERVICE_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// eventually is controlplane.Eventually with the scenario's bound.
func (w *world) eventually(what string, cond func() error) {
	w.t.Helper()
	controlplane.Eventually(w.t, waitFor, what, cond)
}

// serve runs configmap-attacher in-process on loopback for this namespace, with the
// given ingress paths, and waits until it is ready. It stops at cleanup.
func (w *world) serve(in server.Ingress, o server.Options) *server.Server {
	w.t.Helper()
	o.GRPCAddr, o.HTTPAddr, o.Namespace, o.Logger, o.ShutdownTimeout = "127.0.0.1:0", "127.0.0.1:0", w.ns, w.log, 5*time.Second
	o.Ingress = in
	srv, err := server.New(cp.RESTConfig(), o)
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
		select {
		case err := <-done:
			w.t.Fatalf("the service stopped: %v", err)
		default:
		}
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("/readyz %d: %s", resp.StatusCode, b)
		}
		return nil
	})
	return srv
}

// serveWatcher runs the service with the built-in watcher (serve --watch).
func (w *world) serveWatcher() *server.Server {
	w.t.Helper()
	return w.serve(server.Ingress{Watch: true}, server.Options{})
}

// plugin runs bin/kubectl-argo-rollouts against the namespace, as a user would.
func (w *world) plugin(args ...string) string {
	w.t.Helper()
	args = append(args, "--kubeconfig", cp.Kubeconfig(), "--namespace", w.ns)
	out, err := exec.CommandContext(w.ctx, pluginPath(w.t), args...).CombinedOutput()
	if err != nil {
		w.t.Fatalf("kubectl-argo-rollouts %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// revision creates an opted-in ConfigMap revision.
func (w *world) revision(name string) *corev1.ConfigMap {
	w.t.Helper()
	cm, err := w.kc.CoreV1().ConfigMaps(w.ns).Create(w.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true"}},
		Data:       map[string]string{"config.yaml": "name: " + name},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create ConfigMap %s: %v", name, err)
	}
	return cm
}

// secretRevision creates an opted-in Secret revision.
func (w *world) secretRevision(name string) *corev1.Secret {
	w.t.Helper()
	s, err := w.kc.CoreV1().Secrets(w.ns).Create(w.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true"}},
		StringData: map[string]string{"PASSWORD": name},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create Secret %s: %v", name, err)
	}
	return s
}

// revisions lists the names of the namespace's opted-in ConfigMaps.
func (w *world) revisions() map[string]bool {
	w.t.Helper()
	list, err := w.kc.CoreV1().ConfigMaps(w.ns).List(w.ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
	if err != nil {
		w.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, cm := range list.Items {
		out[cm.Name] = true
	}
	return out
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

func (w *world) waitConfigMapGone(name string) {
	w.t.Helper()
	w.waitGone("ConfigMap "+name, func() error {
		_, err := w.kc.CoreV1().ConfigMaps(w.ns).Get(w.ctx, name, metav1.GetOptions{})
		return err
	})
}

// mustExist fails unless the ConfigMap exists.
func (w *world) mustExist(name string) *corev1.ConfigMap {
	w.t.Helper()
	cm, err := w.kc.CoreV1().ConfigMaps(w.ns).Get(w.ctx, name, metav1.GetOptions{})
	if err != nil {
		w.t.Fatalf("ConfigMap %s: %v", name, err)
	}
	return cm
}

// dumpState logs the Rollouts, ReplicaSets, revisions and controller logs of a failed test.
func (w *world) dumpState() {
	ctx := context.Background()
	if list, err := w.dc.Resource(core.RolloutGVR).Namespace(w.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ro := range list.Items {
			w.t.Logf("Rollout %s: %s", ro.GetName(), argorollouts.MarshalStatus(&ro))
		}
	}
	if list, err := w.kc.AppsV1().ReplicaSets(w.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range list.Items {
			w.t.Logf("ReplicaSet %s (%s): spec %d, ready %d, uses %v %v", rs.Name, rs.UID, *rs.Spec.Replicas, rs.Status.ReadyReplicas,
				argorollouts.ConfigMapsOf(rs.Spec.Template.Spec), argorollouts.SecretsOf(rs.Spec.Template.Spec))
		}
	}
	if list, err := w.kc.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, cm := range list.Items {
			w.t.Logf("ConfigMap %s owners %v", cm.Name, cm.OwnerReferences)
		}
	}
	w.t.Logf("---- rollouts-controller log ----\n%s", cp.LogTail("rollouts-controller", 40))
}

// recorder watches one namespace: deletion times of ReplicaSets, ConfigMaps and
// Secrets, and every Pod at its creation, checked against the ConfigMaps and Secrets
// it references.
type recorder struct {
	kc kubernetes.Interface
	ns string

	mu         sync.Mutex
	deleted    map[string]time.Time // "ReplicaSet/name", "ConfigMap/name", "Secret/name"
	rsUsed     map[string][]string  // deleted ReplicaSet -> the ConfigMaps it used
	seen       map[string]bool      // Pod UIDs checked
	violations []string
}

func startRecorder(t *testing.T, ctx context.Context, kc kubernetes.Interface, ns string) *recorder {
	r := &recorder{kc: kc, ns: ns, deleted: map[string]time.Time{}, rsUsed: map[string][]string{}, seen: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	gone := func(kind string) toolscache.ResourceEventHandlerFuncs {
		return toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m, ok := obj.(metav1.Object)
			if !ok {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.deleted[kind+"/"+m.GetName()] = time.Now()
			if rs, ok := obj.(*appsv1.ReplicaSet); ok {
				r.rsUsed[rs.Name] = argorollouts.ConfigMapsOf(rs.Spec.Template.Spec)
			}
		}}
	}
	_, _ = f.Apps().V1().ReplicaSets().Informer().AddEventHandler(gone("ReplicaSet"))
	_, _ = f.Core().V1().ConfigMaps().Informer().AddEventHandler(gone("ConfigMap"))
	_, _ = f.Core().V1().Secrets().Informer().AddEventHandler(gone("Secret"))
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { r.checkPod(ctx, obj.(*corev1.Pod)) }})
	stop := make(chan struct{})
	f.Start(stop)
	f.WaitForCacheSync(stop)
	t.Cleanup(func() {
		close(stop)
		f.Shutdown()
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, v := range r.violations {
			t.Errorf("a Pod was created referencing a missing object: %s", v)
		}
	})
	return r
}

// checkPod checks, once per Pod, that every ConfigMap and Secret it references exists.
func (r *recorder) checkPod(ctx context.Context, p *corev1.Pod) {
	r.mu.Lock()
	first := !r.seen[string(p.UID)]
	r.seen[string(p.UID)] = true
	r.mu.Unlock()
	if !first {
		return
	}
	var missing []string
	for _, name := range argorollouts.ConfigMapsOf(p.Spec) {
		if _, err := r.kc.CoreV1().ConfigMaps(r.ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "ConfigMap "+name)
		}
	}
	for _, name := range argorollouts.SecretsOf(p.Spec) {
		if _, err := r.kc.CoreV1().Secrets(r.ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, "Secret "+name)
		}
	}
	if len(missing) > 0 {
		r.mu.Lock()
		r.violations = append(r.violations, fmt.Sprintf("Pod %s: %s", p.Name, strings.Join(missing, ", ")))
		r.mu.Unlock()
	}
}

// takeViolations returns the violations seen so far and forgets them.
func (r *recorder) takeViolations() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := r.violations
	r.violations = nil
	return v
}

// podsChecked is how many Pods the guard has checked.
func (r *recorder) podsChecked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// deletedReplicaSets maps each ReplicaSet seen deleted to the ConfigMaps it used.
func (r *recorder) deletedReplicaSets() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.rsUsed)
}

// deletedAt returns when kind/name was seen deleted.
func (r *recorder) deletedAt(kind, name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.deleted[kind+"/"+name]
	return at, ok
}
