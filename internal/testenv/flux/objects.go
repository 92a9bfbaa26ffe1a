package flux

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// The Flux kinds the tests create.
var (
	GitRepositoryGVR = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	KustomizationGVR = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
)

// ReconcileAnnotation asks a Flux object for a reconcile now, as `flux reconcile` does:
// a new value of it triggers one.
const ReconcileAnnotation = "reconcile.fluxcd.io/requestedAt"

// GitRepository is a source.toolkit.fluxcd.io/v1 GitRepository of branch main of url,
// polled every interval.
func GitRepository(ns, name, url string, interval time.Duration) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"url": url, "interval": interval.String(), "timeout": "60s",
			"ref": map[string]any{"branch": "main"},
		},
	}}
}

// Kustomization is a kustomize.toolkit.fluxcd.io/v1 Kustomization applying path of the
// GitRepository source (same namespace) into namespace target, every interval, with
// prune as given.
func Kustomization(ns, name, source, path, target string, prune bool, interval time.Duration) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"interval": interval.String(), "retryInterval": interval.String(), "timeout": "2m",
			"path": path, "prune": prune, "targetNamespace": target,
			"sourceRef": map[string]any{"kind": "GitRepository", "name": source},
		},
	}}
}

// Create creates obj (a GitRepository or Kustomization).
func (f *Flux) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	_, err := f.dc.Resource(gvrOf(obj)).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{})
	return err
}

// Get returns the object of gvr ns/name.
func (f *Flux) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return f.dc.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// Delete deletes the object of gvr ns/name.
func (f *Flux) Delete(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) error {
	return f.dc.Resource(gvr).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
}

// Reconcile asks the object of gvr ns/name for a reconcile now (ReconcileAnnotation) and
// returns the request's token: Status.HandledReconcile equals it once it is handled.
func (f *Flux) Reconcile(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (string, error) {
	token := time.Now().Format(time.RFC3339Nano)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, ReconcileAnnotation, token)
	_, err := f.dc.Resource(gvr).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return token, err
}

func gvrOf(obj *unstructured.Unstructured) schema.GroupVersionResource {
	if obj.GetKind() == "GitRepository" {
		return GitRepositoryGVR
	}
	return KustomizationGVR
}

// Status is what a Flux object reports.
type Status struct {
	// Ready is the Ready condition's status, Reason and Message its reason and message.
	Ready, Reason, Message string
	// Revision is a GitRepository's artifact revision or a Kustomization's last applied
	// revision: "main@sha1:<sha>".
	Revision string
	// Inventory lists a Kustomization's inventory entries ("<ns>_<name>_<group>_<kind>").
	Inventory []string
	// HandledReconcile is the token of the last reconcile request handled (Reconcile).
	HandledReconcile string
}

// StatusOf reads obj's status.
func StatusOf(obj *unstructured.Unstructured) Status {
	var st Status
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			st.Ready, _ = m["status"].(string)
			st.Reason, _ = m["reason"].(string)
			st.Message, _ = m["message"].(string)
		}
	}
	st.Revision, _, _ = unstructured.NestedString(obj.Object, "status", "lastAppliedRevision")
	if st.Revision == "" {
		st.Revision, _, _ = unstructured.NestedString(obj.Object, "status", "artifact", "revision")
	}
	st.HandledReconcile, _, _ = unstructured.NestedString(obj.Object, "status", "lastHandledReconcileAt")
	entries, _, _ := unstructured.NestedSlice(obj.Object, "status", "inventory", "entries")
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if id, ok := m["id"].(string); ok {
			st.Inventory = append(st.Inventory, id)
		}
	}
	return st
}

// ReadyAt returns nil when the object is Ready at commit sha (a full or leading SHA).
func (s Status) ReadyAt(sha string) error {
	if s.Ready != "True" || !strings.HasSuffix(s.Revision, ":"+sha) {
		return fmt.Errorf("ready %q at %q (want %s): %s: %s", s.Ready, s.Revision, sha, s.Reason, s.Message)
	}
	return nil
}

// InventoryHas reports whether the inventory lists the core/v1 kind ns/name.
func (s Status) InventoryHas(ns, name, kind string) bool {
	id := ns + "_" + name + "__" + kind
	for _, e := range s.Inventory {
		if e == id {
			return true
		}
	}
	return false
}

// InventoryNames returns the names of the inventory's core/v1 objects of kind in ns whose
// name starts with prefix.
func (s Status) InventoryNames(ns, kind, prefix string) []string {
	var out []string
	for _, e := range s.Inventory {
		name, ok := strings.CutPrefix(e, ns+"_")
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, "__"+kind); ok && strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// waitServed waits until the apiserver serves the kinds the tests create.
func waitServed(ctx context.Context, dc dynamic.Interface) error {
	return controlplane.WaitServed(ctx, dc, Namespace, func(check func() error) error { return poll(ctx, check) },
		GitRepositoryGVR, KustomizationGVR)
}

// poll calls check every 100 ms until it returns nil, a harnessproc.StopPolling, or ctx
// ends.
func poll(ctx context.Context, check func() error) error {
	return harnessproc.Poll(ctx, 100*time.Millisecond, check)
}
