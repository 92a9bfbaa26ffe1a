package externalsecrets_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/externalsecrets"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/scenario"
)

// waitFor bounds every wait on ESO, the controllers or the service: a bound for a stuck
// test, not a timed assertion. The garbage collector learns the ExternalSecret resource
// only at its discovery resync (about 30 s after the CRDs appear), hence the margin.
const waitFor = 2 * time.Minute

// storeName is every scenario's fake SecretStore.
const storeName = "fake"

// world is one scenario: its namespace with a fake SecretStore, and the service.
type world struct {
	*scenario.World
	srv *server.Server
}

// newWorld creates a namespace with a fake SecretStore serving data (key -> value),
// waits until ESO calls the store valid, and starts the service (built-in watcher,
// Secrets allowed).
func newWorld(t *testing.T, data map[string]string) *world {
	t.Helper()
	c := controlplane.Require(t, cp)
	w := &world{World: scenario.New(t, c, "eso-"+rand.String(6), 8*time.Minute, waitFor,
		scenario.Logger(t.Name(), "ESO_SERVICE_LOGS", testing.Verbose()))}
	w.CreateNamespace()
	if _, err := w.Dynamic.Resource(externalsecrets.SecretStoreGVR).Namespace(w.NS).Create(w.Ctx,
		externalsecrets.Store(w.NS, storeName, data), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create SecretStore: %v", err)
	}
	w.Eventually("the SecretStore valid", func() error {
		st, err := w.Dynamic.Resource(externalsecrets.SecretStoreGVR).Namespace(w.NS).Get(w.Ctx, storeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s := externalsecrets.StatusOf(st); s.Ready != "True" {
			return fmt.Errorf("store status %+v", s)
		}
		return nil
	})
	w.srv = w.Serve(server.Ingress{Watch: true}, server.Options{AllowSecrets: true})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("external-secrets log tail:\n%s", eso.LogTail(40))
		}
	})
	return w
}

// externalSecret creates an ExternalSecret reading the scenario's store, its target
// opted in as a revision.
func (w *world) externalSecret(name, target string, keys map[string]string) {
	w.T.Helper()
	es := externalsecrets.ExternalSecret{Namespace: w.NS, Name: name, Store: storeName, Target: target,
		Labels: map[string]string{core.LabelRevision: "true"}, Keys: keys}
	if _, err := w.Dynamic.Resource(externalsecrets.ExternalSecretGVR).Namespace(w.NS).Create(w.Ctx, es.Object(), metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create ExternalSecret %s: %v", name, err)
	}
}

func (w *world) getExternalSecret(name string) (*unstructured.Unstructured, error) {
	return w.Dynamic.Resource(externalsecrets.ExternalSecretGVR).Namespace(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
}

func (w *world) deleteExternalSecret(name string) {
	w.T.Helper()
	if err := w.Dynamic.Resource(externalsecrets.ExternalSecretGVR).Namespace(w.NS).Delete(w.Ctx, name, metav1.DeleteOptions{}); err != nil {
		w.T.Fatalf("delete ExternalSecret %s: %v", name, err)
	}
}

// waitSynced waits until ESO reports the ExternalSecret Ready (its Secret written).
func (w *world) waitSynced(name string) {
	w.T.Helper()
	w.Eventually("ExternalSecret "+name+" Ready", func() error {
		es, err := w.getExternalSecret(name)
		if err != nil {
			return err
		}
		if st := externalsecrets.StatusOf(es); st.Ready != "True" {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
}

func (w *world) secret(name string) (*corev1.Secret, error) {
	return w.Kube.CoreV1().Secrets(w.NS).Get(w.Ctx, name, metav1.GetOptions{})
}

// waitOwners waits until Secret name has an ownerReference to every uid.
func (w *world) waitOwners(name string, uids ...types.UID) *corev1.Secret {
	w.T.Helper()
	var s *corev1.Secret
	w.Eventually(fmt.Sprintf("Secret %s owned by %v", name, uids), func() error {
		var err error
		if s, err = w.secret(name); err != nil {
			return err
		}
		for _, uid := range uids {
			if !argorollouts.OwnedBy(s, uid) {
				return fmt.Errorf("owners %v", s.OwnerReferences)
			}
		}
		return nil
	})
	return s
}

// rollout is a Rollout whose Pods read Secret secret (envFrom); with pause its canary
// stops at 50 % until promoted. revisionHistoryLimit is 0: an old ReplicaSet goes as
// soon as it is scaled down, so the test sees which one the controller keeps.
func rollout(name, secret string, pause bool) *unstructured.Unstructured {
	tmpl, err := argorollouts.Template(podTemplate(name, secret))
	if err != nil {
		panic(err)
	}
	steps := []any{}
	if pause {
		steps = []any{map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{}}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"replicas": int64(2), "template": tmpl, "revisionHistoryLimit": int64(0),
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"strategy": map[string]any{"canary": map[string]any{"steps": steps}}},
	}}
}

func podTemplate(app, secret string) corev1.PodTemplateSpec {
	no, zero := false, int64(0)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1",
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}}}},
	}
}

func (w *world) createRollout(name, secret string, pause bool) {
	w.T.Helper()
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, rollout(name, secret, pause), metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Rollout %s: %v", name, err)
	}
}

// replicaSetUsing waits for the ReplicaSet of Rollout app whose template reads secret.
func (w *world) replicaSetUsing(app, secret string) *appsv1.ReplicaSet {
	w.T.Helper()
	var rs *appsv1.ReplicaSet
	w.Eventually("the ReplicaSet of "+app+" reading "+secret, func() error {
		list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			r := &list.Items[i]
			if c := metav1.GetControllerOf(r); c != nil && c.Name == app && len(argorollouts.SecretsOf(r.Spec.Template.Spec)) == 1 &&
				argorollouts.SecretsOf(r.Spec.Template.Spec)[0] == secret {
				rs = r
				return nil
			}
		}
		return fmt.Errorf("none among %d ReplicaSets", len(list.Items))
	})
	return rs
}

// waitRollout waits until the Rollout's status satisfies ok.
func (w *world) waitRollout(name, what string, ok func(argorollouts.Status) bool) {
	w.T.Helper()
	w.Eventually("Rollout "+name+" "+what, func() error {
		ro, err := argorollouts.Get(w.Ctx, w.Dynamic, w.NS, name)
		if err != nil {
			return err
		}
		if st := argorollouts.StatusOf(ro); !ok(st) {
			return fmt.Errorf("%s", st)
		}
		return nil
	})
}

// warnings counts the Warning Events of reason on the object called name.
func (w *world) warnings(name, reason string) int {
	w.T.Helper()
	list, err := w.Kube.CoreV1().Events(w.NS).List(w.Ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason + ",type=Warning"})
	if err != nil {
		w.T.Fatal(err)
	}
	return len(list.Items)
}

// metric returns the value of the service's series with this name and label text, or
// "" when the series is absent.
func (w *world) metric(series string) string {
	w.T.Helper()
	resp, err := http.Get("http://" + w.srv.HTTPAddr() + "/metrics")
	if err != nil {
		w.T.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// status runs `configmap-attacher status` on the namespace, as a user would.
func (w *world) status(args ...string) string {
	w.T.Helper()
	var out, errOut bytes.Buffer
	args = append([]string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", w.NS, "--include-secrets"}, args...)
	if code := cli.Main(w.Ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}); code != 0 {
		w.T.Fatalf("status exited %d: %s", code, errOut.String())
	}
	return out.String()
}

// timeline records, for each Secret of the namespace, when the test first saw it and
// when it first saw it owned by a ReplicaSet (from a watch started before the Secret).
type timeline struct {
	mu             sync.Mutex
	created, owned map[string]time.Time
}

func (w *world) watchSecrets() *timeline {
	w.T.Helper()
	tl := &timeline{created: map[string]time.Time{}, owned: map[string]time.Time{}}
	wi, err := w.Kube.CoreV1().Secrets(w.NS).Watch(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(w.Ctx)
	w.T.Cleanup(func() { cancel(); wi.Stop() })
	go func() {
		for ev := range wi.ResultChan() {
			s, ok := ev.Object.(*corev1.Secret)
			if !ok || ev.Type == watch.Deleted || ctx.Err() != nil {
				continue
			}
			now := time.Now()
			tl.mu.Lock()
			if _, seen := tl.created[s.Name]; !seen {
				tl.created[s.Name] = now
			}
			for _, o := range s.OwnerReferences {
				if _, seen := tl.owned[s.Name]; o.Kind == "ReplicaSet" && !seen {
					tl.owned[s.Name] = now
				}
			}
			tl.mu.Unlock()
		}
	}()
	return tl
}

// attachDelay is the time from the Secret's first appearance to its first ReplicaSet
// owner, as the watch saw them.
func (tl *timeline) attachDelay(name string) (time.Duration, bool) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	c, ok1 := tl.created[name]
	o, ok2 := tl.owned[name]
	return o.Sub(c), ok1 && ok2
}
