package cache

import (
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// RevisionInformers returns the metadata informers of the config objects this cache
// holds: ConfigMaps, and Secrets when the cache was built with Options.Secrets. The
// revision side of the watcher (package watch) reacts to their changes. Their objects are
// the stored metadata records (record.go): read them through metav1.Object, or Decode one
// into its *metav1.PartialObjectMetadata.
func (c *Cache) RevisionInformers() map[core.Kind]toolscache.SharedIndexInformer {
	out := map[core.Kind]toolscache.SharedIndexInformer{core.KindConfigMap: c.cmInf}
	if c.secInf != nil {
		out[core.KindSecret] = c.secInf
	}
	return out
}
