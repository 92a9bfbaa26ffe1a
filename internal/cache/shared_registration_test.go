package cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// A handler added through ReplicaSetInformer after the cache has synced (the ReplicaSet
// way in's) joins the informer's fanout beside the cache's own handlers: it gets every
// later add, update and delete, in order, as its own registration would, is synced when
// the cache is, and gets nothing once removed; the cache's arrivals keep working beside
// it (docs/design.md, "Per-cluster cost": no goroutine per handler, cache.lightInformer).
func TestHandlerAddedLateSharesTheCacheRegistrationAndMissesNoChange(t *testing.T) {
	const ns = "shop"
	c, kc := runFakeCache(t, Options{})
	var mu sync.Mutex
	var seen []string
	record := func(what string, obj any) {
		if m, ok := obj.(metav1.Object); ok && m.GetNamespace() == ns {
			mu.Lock()
			seen = append(seen, what+" "+m.GetName())
			mu.Unlock()
		}
	}
	inf := c.ReplicaSetInformer()
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(obj any, initial bool) { assert.False(t, initial); record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	})
	require.NoError(t, err)
	assert.True(t, reg.HasSynced(), "synced with the cache")

	ctx := context.Background()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-1"}}
	create(t, kc, rs)
	got, ok := c.AwaitReplicaSet(ctx, ns, "web-1", "rs-1")
	require.True(t, ok, "the arrivals beside the joined handler")
	assert.Equal(t, "rs-1", string(got.UID))
	rs.Labels = map[string]string{"v": "2"}
	_, err = kc.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, kc.AppsV1().ReplicaSets(ns).Delete(ctx, "web-1", metav1.DeleteOptions{}))
	want := []string{"add web-1", "update web-1", "delete web-1"}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == len(want)
	}, 10*time.Second, 5*time.Millisecond, "the three changes")
	mu.Lock()
	assert.Equal(t, want, seen)
	mu.Unlock()

	require.NoError(t, inf.RemoveEventHandler(reg))
	require.Error(t, inf.RemoveEventHandler(reg), "removed twice")
	create(t, kc, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-2", UID: "rs-2"}})
	_, ok = c.AwaitReplicaSet(ctx, ns, "web-2", "rs-2")
	require.True(t, ok, "the arrivals once the joined handler is removed")
	mu.Lock()
	assert.Equal(t, want, seen, "a change reached a removed handler")
	mu.Unlock()
}
