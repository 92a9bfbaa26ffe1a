package kube

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ApplicationGVR is Argo CD's Application resource.
var ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}

// DefaultArgoCDNamespace is where Argo CD's own Applications live unless a tracking id
// names another namespace.
const DefaultArgoCDNamespace = "argocd"

// ApplicationsTTL is how long Applications remembers an answer (an Application's sync
// options, or that it could not be read), so that a burst of attaches reads each
// Application once.
const ApplicationsTTL = 30 * time.Second

// Applications reads Argo CD Applications' sync options (core.ApplicationReader) with
// the dynamic client, remembering each answer for ApplicationsTTL. Reading Applications
// is optional: without the permission (the chart's argocd.applications RBAC) every
// answer is an error and the app-level check is skipped.
type Applications struct {
	Dynamic dynamic.Interface
	// Namespace is Argo CD's own namespace (DefaultArgoCDNamespace when empty).
	Namespace string

	mu   sync.Mutex
	seen map[string]appAnswer
}

type appAnswer struct {
	opts []string
	err  error
	at   time.Time
}

// SyncOptions returns spec.syncPolicy.syncOptions of Application namespace/name.
func (a *Applications) SyncOptions(ctx context.Context, namespace, name string) ([]string, error) {
	if namespace == "" {
		namespace = a.Namespace
	}
	if namespace == "" {
		namespace = DefaultArgoCDNamespace
	}
	key := namespace + "/" + name
	a.mu.Lock()
	if got, ok := a.seen[key]; ok && time.Since(got.at) < ApplicationsTTL {
		a.mu.Unlock()
		return got.opts, got.err
	}
	a.mu.Unlock()
	var opts []string
	app, err := a.Dynamic.Resource(ApplicationGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		opts, _, _ = unstructured.NestedStringSlice(app.Object, "spec", "syncPolicy", "syncOptions")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.seen == nil || len(a.seen) > 10000 {
		a.seen = map[string]appAnswer{}
	}
	a.seen[key] = appAnswer{opts: opts, err: err, at: time.Now()}
	return opts, err
}
