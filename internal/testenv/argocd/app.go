package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// Finalizer makes Argo CD delete an Application's resources before the Application.
const Finalizer = "resources-finalizer.argocd.argoproj.io"

// App is an Application with one source, auto-synced with prune and selfHeal into the
// in-cluster destination.
type App struct {
	Name, RepoURL, Path string
	// Namespace is the destination namespace.
	Namespace string
	// SyncOptions are spec.syncPolicy.syncOptions (for example "ServerSideApply=true").
	SyncOptions []string
	// ServerSideDiff sets the compare option ServerSideDiff=true on the Application.
	ServerSideDiff bool
	// Finalizer adds the resources finalizer (Finalizer).
	Finalizer bool
	// Helm, when set, is spec.source.helm.
	Helm map[string]any
}

// Object is the Application as Argo CD reads it.
func (app App) Object() *unstructured.Unstructured {
	meta := map[string]any{"name": app.Name, "namespace": Namespace,
		// A normal refresh on creation: the first sync follows without waiting for the
		// reconciliation timeout.
		"annotations": map[string]any{"argocd.argoproj.io/refresh": "normal"}}
	if app.ServerSideDiff {
		meta["annotations"].(map[string]any)["argocd.argoproj.io/compare-options"] = "ServerSideDiff=true"
	}
	if app.Finalizer {
		meta["finalizers"] = []any{Finalizer}
	}
	source := map[string]any{"repoURL": app.RepoURL, "targetRevision": "HEAD", "path": app.Path}
	if app.Helm != nil {
		source["helm"] = app.Helm
	}
	policy := map[string]any{"automated": map[string]any{"prune": true, "selfHeal": true}}
	if len(app.SyncOptions) > 0 {
		opts := make([]any, len(app.SyncOptions))
		for i, o := range app.SyncOptions {
			opts[i] = o
		}
		policy["syncOptions"] = opts
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Application", "metadata": meta,
		"spec": map[string]any{"project": "default", "source": source, "syncPolicy": policy,
			"destination": map[string]any{"server": "https://kubernetes.default.svc", "namespace": app.Namespace}},
	}}
}

// Create creates an Application object (App.Object, or one read from a file).
func (a *ArgoCD) Create(ctx context.Context, obj *unstructured.Unstructured) error {
	if _, err := a.dc.Resource(ApplicationGVR).Namespace(Namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create Application %s: %w", obj.GetName(), err)
	}
	return nil
}

// Refresh asks for a normal refresh of the Application (Git is read again now), as
// `argocd app get --refresh` does.
func (a *ArgoCD) Refresh(ctx context.Context, name string) error {
	patch := []byte(`{"metadata":{"annotations":{"argocd.argoproj.io/refresh":"normal"}}}`)
	if _, err := a.dc.Resource(ApplicationGVR).Namespace(Namespace).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("refresh Application %s: %w", name, err)
	}
	return nil
}

// Delete deletes the Application (with Finalizer, Argo CD deletes its resources first).
func (a *ArgoCD) Delete(ctx context.Context, name string) error {
	return a.dc.Resource(ApplicationGVR).Namespace(Namespace).Delete(ctx, name, metav1.DeleteOptions{})
}

// Get returns the Application.
func (a *ArgoCD) Get(ctx context.Context, name string) (*unstructured.Unstructured, error) {
	return a.dc.Resource(ApplicationGVR).Namespace(Namespace).Get(ctx, name, metav1.GetOptions{})
}

// Status is what the controller reports about an Application.
type Status struct {
	// Sync and Health are status.sync.status and status.health.status; Revision is the
	// commit they were compared at.
	Sync, Health, Revision string
	// OpPhase, OpRevision and OpMessage are the last sync operation's phase, commit and
	// message.
	OpPhase, OpRevision, OpMessage string
	// OpStarted is when the last sync operation started (second precision).
	OpStarted time.Time
	// OutOfSync lists the resources not in sync, as Kind/Name.
	OutOfSync []string
	// Pruned lists what the last sync operation pruned, as Kind/Name.
	Pruned []string
	// NotHealthy lists the resources whose health is not Healthy, as
	// "Kind/Name: status message".
	NotHealthy []string
	// Conditions are status.conditions, as "type: message".
	Conditions []string
}

// StatusOf reads an Application's status.
func StatusOf(app *unstructured.Unstructured) Status {
	str := func(f ...string) string { s, _, _ := unstructured.NestedString(app.Object, f...); return s }
	s := Status{Sync: str("status", "sync", "status"), Health: str("status", "health", "status"),
		Revision: revisionOf(app, "status", "sync"), OpPhase: str("status", "operationState", "phase"),
		OpRevision: revisionOf(app, "status", "operationState", "syncResult"), OpMessage: str("status", "operationState", "message")}
	s.OpStarted, _ = time.Parse(time.RFC3339, str("status", "operationState", "startedAt"))
	res, _, _ := unstructured.NestedSlice(app.Object, "status", "resources")
	for _, r := range res {
		m, _ := r.(map[string]any)
		if m["status"] != "Synced" {
			s.OutOfSync = append(s.OutOfSync, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
		}
		if h, ok := m["health"].(map[string]any); ok && h["status"] != "Healthy" {
			s.NotHealthy = append(s.NotHealthy, fmt.Sprintf("%v/%v: %v %v", m["kind"], m["name"], h["status"], h["message"]))
		}
	}
	done, _, _ := unstructured.NestedSlice(app.Object, "status", "operationState", "syncResult", "resources")
	for _, r := range done {
		m, _ := r.(map[string]any)
		if m["status"] == "Pruned" {
			s.Pruned = append(s.Pruned, fmt.Sprintf("%v/%v", m["kind"], m["name"]))
		}
	}
	conds, _, _ := unstructured.NestedSlice(app.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		s.Conditions = append(s.Conditions, fmt.Sprintf("%v: %v", m["type"], m["message"]))
	}
	return s
}

// revisionOf is the revision field under path, or for an Application with several
// sources the one commit all of its revisions name ("" when they differ).
func revisionOf(app *unstructured.Unstructured, path ...string) string {
	if r, _, _ := unstructured.NestedString(app.Object, append(path, "revision")...); r != "" {
		return r
	}
	revs, _, _ := unstructured.NestedStringSlice(app.Object, append(path, "revisions")...)
	for _, r := range revs {
		if r != revs[0] {
			return ""
		}
	}
	if len(revs) == 0 {
		return ""
	}
	return revs[0]
}

// SyncedAt reports whether the app is Synced at commit sha, its last sync operation
// (of sha) succeeded, and nothing is out of sync.
func (s Status) SyncedAt(sha string) error {
	if s.Sync != "Synced" || s.Revision != sha || s.OpPhase != "Succeeded" || s.OpRevision != sha || len(s.OutOfSync) > 0 {
		return fmt.Errorf("not synced at %.8s: %s", sha, s)
	}
	return nil
}

// HealthyAt is SyncedAt and health Healthy.
func (s Status) HealthyAt(sha string) error {
	if err := s.SyncedAt(sha); err != nil {
		return err
	}
	if s.Health != "Healthy" {
		return fmt.Errorf("synced at %.8s but health %s", sha, s.Health)
	}
	return nil
}

func (s Status) String() string {
	return fmt.Sprintf("sync %s at %.8s, health %s %v, operation %s at %.8s (%s), out of sync %v, pruned %v, conditions [%s]",
		s.Sync, s.Revision, s.Health, s.NotHealthy, s.OpPhase, s.OpRevision, s.OpMessage, s.OutOfSync, s.Pruned, strings.Join(s.Conditions, "; "))
}

// MarshalStatus is the Application's status as JSON (for failure messages).
func MarshalStatus(app *unstructured.Unstructured) string {
	st, _, _ := unstructured.NestedMap(app.Object, "status")
	b, _ := json.Marshal(st)
	return string(b)
}
