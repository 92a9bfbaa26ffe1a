package cache

import (
	toolscache "k8s.io/client-go/tools/cache"
)

// ReplicaSetInformer returns the ReplicaSet informer the cache reads from, so a watcher
// can add its event handler to the same informer (one watch, one copy in memory).
// Handlers receive the stored records (record.go): they read them through metav1.Object,
// or Decode one into its *appsv1.ReplicaSet; they must not mutate them. Like every
// informer of the cache it is a lightInformer: a handler added after the cache has
// started is not handed the objects stored already (read them from the store, as the
// watcher's replay does), and must not block.
func (c *Cache) ReplicaSetInformer() toolscache.SharedIndexInformer { return c.rsInf }

// UsesOf returns the core.UsesKey of every config object a ReplicaSet handed to a
// ReplicaSetInformer handler uses (computed once, when it was stored), for the revision
// side's first-use look (watch.RevisionSources).
func UsesOf(obj any) []string {
	keys, _ := usesIndexFunc(obj)
	return keys
}
