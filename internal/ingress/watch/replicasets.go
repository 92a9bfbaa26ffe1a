package watch

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

const kindReplicaSet = "ReplicaSet"

// NewReplicaSets returns the ReplicaSet way in (serve --watch, the built-in watcher): a
// Watcher that dispatches every ReplicaSet of replicaSets (typically
// cache.Cache.ReplicaSetInformer) that appears or changes what it needs, on the watcher
// path, to d (docs/design.md, "One way in"). Errors: no informer or no dispatcher.
func NewReplicaSets(replicaSets toolscache.SharedIndexInformer, d Dispatcher, opts Options) (*Watcher, error) {
	feeds := map[string]feed{}
	if replicaSets != nil {
		feeds[kindReplicaSet] = replicaSetFeed{inf: replicaSets}
	}
	return newWatcher("watcher", feeds, d, opts)
}

// replicaSetFeed is the ReplicaSet way in's feed: every ReplicaSet is queued, and every
// update that can change what it needs (relevantUpdate); each is dispatched as a
// ReplicaSet event.
type replicaSetFeed struct {
	inf toolscache.SharedIndexInformer
}

func (f replicaSetFeed) informer() toolscache.SharedIndexInformer { return f.inf }

func (replicaSetFeed) admit(any) bool { return true }

func (replicaSetFeed) relevant(old, obj any) bool { return relevantUpdate(old, obj) }

// request is base as it is: the watcher path, with the ReplicaSet's event.
func (replicaSetFeed) request(base dispatch.Request, _ metav1.Object) dispatch.Request { return base }

// relevantUpdate reports whether an update can change what a ReplicaSet needs: its spec
// (generation), owners, labels or annotations. Status-only updates (replica counts, the
// ReplicaSet controller's frequent writes) are skipped: they would re-run an attach that
// already happened, and the watcher's own resync repairs anything missed.
// It reads the objects through metav1.Object, so the cache's stored records (package
// cache) and Kubernetes objects alike are compared.
func relevantUpdate(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetUID() != n.GetUID() || o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}
