package cache

import toolscache "k8s.io/client-go/tools/cache"

// ReplicaSetInformer returns the shared ReplicaSet informer the cache reads from, so a
// watcher can add its event handler to the same informer (one watch, one copy in
// memory). Handlers must not mutate the objects they receive.
func (c *Cache) ReplicaSetInformer() toolscache.SharedIndexInformer {
	return c.typed.Apps().V1().ReplicaSets().Informer()
}
