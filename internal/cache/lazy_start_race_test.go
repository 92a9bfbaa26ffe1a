package cache

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The Deployment, Rollout and user informers start on demand from whichever need comes
// first: an attach (Users), a sweep (Workloads), a read (Deployment, Rollout) or a
// ReplicaSet a Deployment controls. Those needs racing one another, and a stop racing
// them (before the cache has synced, or after), start each informer at most once (no data
// race: run with -race) and leave no goroutine behind once Run and the callers have
// returned.
func TestConcurrentLazyStartsAndAStopLeaveNoGoroutine(t *testing.T) {
	for _, stopAfterSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("stop after sync: %v", stopAfterSync), func(t *testing.T) {
			base := settledGoroutineCount()
			for round := range 3 {
				c, kc := newFakeCache(t, Options{RolloutPoll: 10 * time.Millisecond})
				kc.Resources = []*metav1.APIResourceList{{GroupVersion: core.RolloutGroup + "/" + core.RolloutVersion,
					APIResources: []metav1.APIResource{{Name: core.RolloutResource, Namespaced: true, Kind: core.RolloutKind}}}}
				c.OnListersSynced(func([]string) {})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- c.Run(ctx) }()
				if stopAfterSync {
					require.NoError(t, c.WaitForSync(ctx))
				}
				var callers sync.WaitGroup
				needs := []func(){
					func() { _, _ = c.Users(ctx, core.KindConfigMap, "shop", "cfg") },
					func() {
						wctx, wcancel := context.WithTimeout(ctx, time.Second)
						defer wcancel()
						_, _ = c.Workloads(wctx, "shop")
					},
					func() { _, _ = c.Deployment(ctx, "shop", "web") },
					func() { _, _ = c.Rollout(ctx, "shop", "web") },
					func() {
						_, _ = kc.AppsV1().ReplicaSets("shop").Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop",
							Name: fmt.Sprintf("web-%d", round), OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment",
								Name: "web", UID: "dep-1", Controller: new(true)}}}}, metav1.CreateOptions{})
					},
				}
				for _, need := range needs {
					callers.Go(need)
				}
				callers.Go(cancel) // the stop races the needs
				callers.Wait()
				require.NoError(t, <-done)
				if stopAfterSync {
					require.True(t, c.listers.wanted.Load(), "the needs wanted the listers")
				}
			}
			require.Eventually(t, func() bool { return settledGoroutineCount() <= base+2 }, 20*time.Second, 100*time.Millisecond,
				"goroutines back to before the caches (%d before)", base)
		})
	}
}

func settledGoroutineCount() int {
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	return runtime.NumGoroutine()
}
