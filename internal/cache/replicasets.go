package cache

import toolscache "k8s.io/client-go/tools/cache"

// ReplicaSetInformer returns the shared ReplicaSet informer the cache reads from, so a
// watcher can add its event handler to the same informer (one watch, one copy in
// memory). Handlers receive the stored records (record.go): they read them through
// metav1.Object, or Decode one into its *appsv1.ReplicaSet; they must not mutate them.
func (c *Cache) ReplicaSetInformer() toolscache.SharedIndexInformer {
	return c.typed.Apps().V1().ReplicaSets().Informer()
}
