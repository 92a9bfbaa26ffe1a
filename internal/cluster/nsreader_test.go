package cluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// awaitingCache is a namespace's cache as nsReader sees it: it holds cached and its
// watch delivers arrives.
type awaitingCache struct {
	core.Reader
	cached, arrives *appsv1.ReplicaSet
}

func (c awaitingCache) CachedReplicaSet(_, name string) (*appsv1.ReplicaSet, bool) {
	return c.cached, c.cached != nil && c.cached.Name == name
}

func (c awaitingCache) AwaitReplicaSet(_ context.Context, _, name string, uid types.UID) (*appsv1.ReplicaSet, bool) {
	return c.arrives, c.arrives != nil && c.arrives.Name == name && c.arrives.UID == uid
}

// A cluster limited to some namespaces answers from, and waits on, each namespace's own
// cache; elsewhere it has nothing cached and nothing to wait for (the core reads live).
func TestNamespacedReaderCachesAndWaitsPerNamespace(t *testing.T) {
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "rs-1"}}
	r := nsReader{byNS: map[string]core.Reader{"shop": awaitingCache{cached: rs, arrives: rs}}}
	for _, tc := range []struct {
		name, ns string
		want     bool
	}{
		{"a namespace with a cache", "shop", true},
		{"a namespace without one", "other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cached := r.CachedReplicaSet(tc.ns, "web-1")
			_, arrived := r.AwaitReplicaSet(context.Background(), tc.ns, "web-1", "rs-1")
			assert.Equal(t, tc.want, cached, "cached")
			assert.Equal(t, tc.want, arrived, "arrived")
		})
	}
}
