package cache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// A Pod whose ReplicaSet uses the config object is covered by it, never an owner, even
// when the Pod informer (started later, with a fresh list: lazyUsers) holds the Pod before
// the ReplicaSet informer holds its ReplicaSet: such an answer is partial, and Users reads
// live instead.
func TestPodOfAReplicaSetTheCacheLacksIsNeverAnOwner(t *testing.T) {
	tests := []struct {
		name      string
		rsCached  bool
		wantOwner []string
	}{
		{name: "ReplicaSet cached: the cache answers, the Pod covered", rsCached: true, wantOwner: []string{"ReplicaSet/web-1"}},
		{name: "ReplicaSet not cached yet: read live, the Pod covered", wantOwner: []string{"ReplicaSet/web-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := &appsv1.ReplicaSet{ObjectMeta: objMeta("web-1", "rs-1", nil), Spec: appsv1.ReplicaSetSpec{Template: template("cfg")}}
			pod := &corev1.Pod{ObjectMeta: objMeta("web-1-a", "pod-1", controller("ReplicaSet", "web-1", "rs-1")), Spec: template("cfg").Spec}
			ctx := context.Background()
			c, _ := runFakeCache(t, Options{}, rs, pod)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			require.True(t, c.awaitUsers(wctx), "user informers synced")
			if !tc.rsCached {
				// The ReplicaSet informer's watch lags: its store does not hold the
				// ReplicaSet yet (a test-only stand-in for the lag; no event follows).
				obj, ok, err := c.rsInf.GetStore().GetByKey("shop/web-1")
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, c.rsInf.GetIndexer().Delete(obj))
				_, ok = cached(c.rsInf, "shop", "web-1").(*appsv1.ReplicaSet)
				require.False(t, ok)
			}

			u, err := c.Users(wctx, core.KindConfigMap, "shop", "cfg")
			require.NoError(t, err)
			assert.Equal(t, tc.wantOwner, ownerNames(u))
		})
	}
}
