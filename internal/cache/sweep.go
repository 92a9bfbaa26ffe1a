package cache

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The orphan sweep's view of the cache (gc.Store, docs/design.md, "The sweep from the
// caches"): every object of a namespace from the informers' namespace index, so a sweep
// in steady state sends no request at all.

// absentCheckEvery bounds how often Workloads re-confirms, with one discovery GET, that
// the Argo Rollouts API is still absent.
const absentCheckEvery = 10 * time.Second

// Covers reports whether the informers hold every object of namespace.
func (c *Cache) Covers(namespace string) bool { return c.inScope(namespace) }

// Workloads returns the cached objects with a pod template or pod spec in namespace
// (ControllerRevisions excepted: the sweep does not read them), and whether Rollouts are
// known completely: their informer has synced, or the Argo Rollouts API was confirmed
// absent within absentCheckEvery (checked now if not). An informer whose namespace index
// fails makes the answer incomplete (false) too.
func (c *Cache) Workloads(ctx context.Context, namespace string) ([]any, bool) {
	if !c.awaitUsers(ctx) { // started with the first sweep (lazyUsers)
		return nil, false
	}
	var out []any
	for _, inf := range append([]toolscache.SharedIndexInformer{c.rsInf, c.depInf}, c.userInfs...) {
		objs, err := decodedByNamespace(inf, namespace)
		if err != nil {
			return out, false // an index that cannot answer is not an empty namespace
		}
		out = append(out, objs...)
	}
	inf := c.rollouts.Load()
	if inf == nil {
		if !c.rolloutsAbsent() {
			return out, false
		}
		return out, true
	}
	if !(*inf).HasSynced() {
		return out, false
	}
	objs, err := decodedByNamespace(*inf, namespace) // copies: a reader may edit its own
	if err != nil {
		return out, false
	}
	return append(out, objs...), true
}

// decodedByNamespace returns the objects of namespace in inf, decoded (Decode).
func decodedByNamespace(inf toolscache.SharedIndexInformer, namespace string) ([]any, error) {
	objs, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(objs))
	for _, o := range objs {
		d, err := Decode(o)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// rolloutsAbsent reports whether the Argo Rollouts API was confirmed absent lately; it
// looks again (starting the informer if the API appeared) when the last look is older
// than absentCheckEvery.
func (c *Cache) rolloutsAbsent() bool {
	c.absentMu.Lock()
	defer c.absentMu.Unlock()
	if time.Since(c.absentAt) < absentCheckEvery {
		return true
	}
	if !c.lookForRollouts() {
		return false // the look failed: unknown
	}
	if c.listers.served.Load() {
		return false // found now: not synced yet
	}
	c.absentAt = time.Now()
	return true
}

// Revisions returns the cached metadata of the ConfigMaps or Secrets of namespace;
// false when that kind is not cached.
func (c *Cache) Revisions(kind core.Kind, namespace string) ([]*metav1.PartialObjectMetadata, bool) {
	inf := c.configInformer(kind)
	if inf == nil {
		return nil, false
	}
	objs, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return nil, false // the sweep reads this kind live instead
	}
	out := make([]*metav1.PartialObjectMetadata, 0, len(objs))
	for _, o := range objs {
		if r, ok := o.(*metaRecord); ok {
			out = append(out, r.partial())
		}
	}
	return out, true
}

// RevisionNamespaces returns the namespaces holding a cached object of kind with the
// opt-in label; false when that kind is not cached.
func (c *Cache) RevisionNamespaces(kind core.Kind) ([]string, bool) {
	inf := c.configInformer(kind)
	if inf == nil {
		return nil, false
	}
	seen := map[string]bool{}
	for _, o := range inf.GetStore().List() {
		if r, ok := o.(*metaRecord); ok && !seen[r.namespace] {
			if v, _ := r.label(core.LabelRevision); v == "true" {
				seen[r.namespace] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	return out, true
}

func (c *Cache) configInformer(kind core.Kind) toolscache.SharedIndexInformer {
	if kind == core.KindSecret {
		return c.secInf
	}
	return c.cmInf
}
