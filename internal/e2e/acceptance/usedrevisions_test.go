package acceptance_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// guardUsedRevisions fails the test if a ConfigMap is ever missing while a ReplicaSet
// that already existed uses it, whoever controls that ReplicaSet (a Rollout, an
// Experiment, a Deployment): a revision must live exactly as long as a ReplicaSet that
// uses it, scaled down or not. It samples the namespace until the test ends: the
// ConfigMaps first, then the ReplicaSets, counting only ReplicaSets created well before
// the ConfigMaps were listed (a new ReplicaSet's revision may be created just after it).
func (w *world) guardUsedRevisions() {
	ctx, cancel := context.WithCancel(w.Ctx)
	var mu sync.Mutex
	seen := map[string]bool{}
	var violations []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			for _, v := range w.missingUsedRevisions(ctx) {
				mu.Lock()
				if !seen[v] {
					seen[v] = true
					violations = append(violations, v)
				}
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	w.T.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, v := range violations {
			w.T.Errorf("a revision in use was deleted: %s", v)
		}
	})
}

// missingUsedRevisions is one sample of guardUsedRevisions.
func (w *world) missingUsedRevisions(ctx context.Context) []string {
	listed := time.Now()
	cms, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	have := map[string]bool{}
	for _, cm := range cms.Items {
		have[cm.Name] = true
	}
	rss, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil
	}
	var out []string
	for _, rs := range rss.Items {
		if !rs.CreationTimestamp.Time.Before(listed.Add(-3 * time.Second)) {
			continue
		}
		for _, cm := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
			if !have[cm] {
				out = append(out, fmt.Sprintf("ConfigMap %s, used by ReplicaSet %s (controller %s, %d replicas)", cm, rs.Name, controllerName(&rs), *rs.Spec.Replicas))
			}
		}
	}
	return out
}

func controllerName(rs *appsv1.ReplicaSet) string {
	if c := metav1.GetControllerOf(rs); c != nil {
		return c.Kind + "/" + c.Name
	}
	return "none"
}

// revisionsMatchAllReplicaSets checks that the namespace's revisions are exactly the
// ConfigMaps its ReplicaSets (any controller) use: nothing in use is gone, nothing
// unused is left.
func (w *world) revisionsMatchAllReplicaSets() error {
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, rs := range list.Items {
		for _, cm := range argorollouts.ConfigMapsOf(rs.Spec.Template.Spec) {
			used[cm] = true
		}
	}
	have := w.Revisions()
	if fmt.Sprint(keys(used)) != fmt.Sprint(keys(have)) {
		return fmt.Errorf("%d ReplicaSets use %v; revisions %v", len(list.Items), keys(used), keys(have))
	}
	return nil
}

// createRollout creates revision a's Rollout with strategy and extra spec fields.
func (w *world) createRollout(a app, strategy map[string]any, extra map[string]any) {
	w.T.Helper()
	ro, err := a.rollout()
	if err != nil {
		w.T.Fatal(err)
	}
	spec := ro.Object["spec"].(map[string]any)
	spec["strategy"] = strategy
	for k, v := range extra {
		spec[k] = v
	}
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, ro, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Rollout %s: %v", a.name, err)
	}
}

// createObject creates obj (an AnalysisTemplate, an Ingress) in the namespace through
// the dynamic client.
func (w *world) createObject(resource string, group, version string, obj map[string]any) {
	w.T.Helper()
	u := &unstructured.Unstructured{Object: obj}
	gvr := core.RolloutGVR
	gvr.Group, gvr.Version, gvr.Resource = group, version, resource
	if _, err := w.Dynamic.Resource(gvr).Namespace(w.NS).Create(w.Ctx, u, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create %s %s: %v", resource, u.GetName(), err)
	}
}

// replicaSetsControlledBy lists the ReplicaSets whose controller is of kind.
func (w *world) replicaSetsControlledBy(kind string) []appsv1.ReplicaSet {
	w.T.Helper()
	list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		w.T.Fatal(err)
	}
	var out []appsv1.ReplicaSet
	for _, rs := range list.Items {
		if c := metav1.GetControllerOf(&rs); c != nil && c.Kind == kind {
			out = append(out, rs)
		}
	}
	return out
}

// promote and abort write what `kubectl argo rollouts promote` and `abort` write
// (package argorollouts), so that the scenarios need no plugin of the Rollouts version
// under test.
func (w *world) promote(name string) {
	w.T.Helper()
	if err := argorollouts.Promote(w.Ctx, w.Dynamic, w.NS, name); err != nil {
		w.T.Fatal(err)
	}
}

func (w *world) abort(name string) {
	w.T.Helper()
	if err := argorollouts.Abort(w.Ctx, w.Dynamic, w.NS, name); err != nil {
		w.T.Fatal(err)
	}
}
