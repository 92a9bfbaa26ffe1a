package cache

import (
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// ListedIndex maps core.UsesKey of a config object to the ReplicaSets, Deployments and
// Rollouts whose annotations (or pod template's) list it by name (core.ListedKeys).
const ListedIndex = "configmap-attacher.io/listed"

// listedIndexFunc reads a record's keys (computed when it was stored) or, for a Rollout,
// computes them.
func listedIndexFunc(obj any) ([]string, error) {
	if r, ok := obj.(*record); ok {
		return r.listed(), nil
	}
	return core.ListedKeys(obj), nil
}

// addListedIndex adds ListedIndex to the ReplicaSet and Deployment informers (the
// Rollout informer gets it when it starts).
func (c *Cache) addListedIndex() error {
	for _, inf := range []toolscache.SharedIndexInformer{c.rsInf, c.depInf} {
		if err := inf.AddIndexers(toolscache.Indexers{ListedIndex: listedIndexFunc}); err != nil {
			return err
		}
	}
	return nil
}

// Listed reports whether a cached ReplicaSet, Deployment or Rollout lists the config
// object kind namespace/name by name in its annotations: the revision side's candidate
// check for an unlabelled object (docs/design.md, "The revision side"). It reads only the
// caches; before they have synced it may miss a listing (the resync repairs that).
func (c *Cache) Listed(kind core.Kind, namespace, name string) bool {
	key := core.UsesKey(kind, namespace, name)
	infs := []toolscache.SharedIndexInformer{c.rsInf, c.depInf}
	if ro := c.rollouts.Load(); ro != nil {
		infs = append(infs, *ro)
	}
	for _, inf := range infs {
		if objs, err := inf.GetIndexer().ByIndex(ListedIndex, key); err == nil && len(objs) > 0 {
			return true
		}
	}
	return false
}
