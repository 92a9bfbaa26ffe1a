package acceptance_test

import (
	"context"
	"fmt"
	"maps"
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/scenario"
)

// waitFor bounds every wait on the controllers or the service. It is a bound for a
// stuck test, not a timed assertion: the conditions usually hold within seconds.
const waitFor = 90 * time.Second

// world is one scenario's namespace on the shared control plane (scenario.World), with
// a guard that checks every Pod created in it.
type world struct {
	*scenario.World
	// events records when ReplicaSets, ConfigMaps and Secrets of the namespace were
	// deleted, and every Pod that was created referencing a missing ConfigMap or Secret.
	events *recorder
	// unobserved is when each Rollout was first seen with a spec its controller had not
	// observed (status.observedGeneration behind): nudgeIfUnobserved.
	unobserved map[string]time.Time
}

// newWorld creates a fresh namespace (and waits for its default ServiceAccount).
func newWorld(t *testing.T) *world {
	w := newBareWorld(t)
	w.CreateNamespace()
	return w
}

// newBareWorld picks a namespace name and starts the guard, without creating the
// namespace (for a test whose player creates it).
func newBareWorld(t *testing.T) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	timed(t)
	w := &world{World: scenario.New(t, c, "acc-"+rand.String(6), 10*time.Minute, waitFor,
		scenario.Logger(t.Name(), "ACCEPTANCE_SERVICE_LOGS", testing.Verbose())), unobserved: map[string]time.Time{}}
	w.events = startRecorder(t, w.Ctx, w.Kube, w.NS)
	t.Cleanup(func() {
		if t.Failed() {
			w.dumpState()
		}
	})
	return w
}

// plugin runs bin/kubectl-argo-rollouts against the namespace, as a user would.
func (w *world) plugin(args ...string) string {
	w.T.Helper()
	args = append(args, "--kubeconfig", cp.Kubeconfig(), "--namespace", w.NS)
	out, err := exec.CommandContext(w.Ctx, pluginPath(w.T), args...).CombinedOutput()
	if err != nil {
		w.T.Fatalf("kubectl-argo-rollouts %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// revision creates an opted-in ConfigMap revision.
func (w *world) revision(name string) *corev1.ConfigMap {
	w.T.Helper()
	cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Create(w.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true"}},
		Data:       map[string]string{"config.yaml": "name: " + name},
	}, metav1.CreateOptions{})
	if err != nil {
		w.T.Fatalf("create ConfigMap %s: %v", name, err)
	}
	return cm
}

// secretRevision creates an opted-in Secret revision.
func (w *world) secretRevision(name string) *corev1.Secret {
	w.T.Helper()
	s, err := w.Kube.CoreV1().Secrets(w.NS).Create(w.Ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true"}},
		StringData: map[string]string{"PASSWORD": name},
	}, metav1.CreateOptions{})
	if err != nil {
		w.T.Fatalf("create Secret %s: %v", name, err)
	}
	return s
}

func (w *world) waitConfigMapGone(name string) {
	w.T.Helper()
	w.WaitGone("ConfigMap "+name, func() error {
		_, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
		return err
	})
}

// mustExist fails unless the ConfigMap exists.
func (w *world) mustExist(name string) *corev1.ConfigMap {
	w.T.Helper()
	cm, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
	if err != nil {
		w.T.Fatalf("ConfigMap %s: %v", name, err)
	}
	return cm
}

// dumpState logs the Rollouts, ReplicaSets, revisions and controller logs of a failed test.
func (w *world) dumpState() {
	ctx := context.Background()
	if list, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ro := range list.Items {
			w.T.Logf("Rollout %s: %s", ro.GetName(), argorollouts.MarshalStatus(&ro))
		}
	}
	if list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, rs := range list.Items {
			w.T.Logf("ReplicaSet %s (%s): spec %d, ready %d, uses %v %v", rs.Name, rs.UID, *rs.Spec.Replicas, rs.Status.ReadyReplicas,
				argorollouts.ConfigMapsOf(rs.Spec.Template.Spec), argorollouts.SecretsOf(rs.Spec.Template.Spec))
		}
	}
	if list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(ctx, metav1.ListOptions{}); err == nil {
		for _, cm := range list.Items {
			w.T.Logf("ConfigMap %s owners %v", cm.Name, cm.OwnerReferences)
		}
	}
	w.T.Logf("---- rollouts-controller log ----\n%s", cp.LogTail("rollouts-controller", 40))
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
