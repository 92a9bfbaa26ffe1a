package cluster

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// okDispatcher answers every event OK without doing anything.
type okDispatcher struct{}

func (okDispatcher) Dispatch(context.Context, dispatch.Request) dispatch.Answer {
	return dispatch.Answer{Class: dispatch.ClassOK}
}

func (okDispatcher) GaveUp(dispatch.Path, core.Event, string, error) {}

// An idle cluster's runtime (caches, both watchers, the periodic sweeper with a triggered
// sweep due) costs fewer than 20 goroutines, those of its two watches and little else,
// and once stopped leaves no goroutine behind: its probe, resyncs, retries and triggered
// sweeps are timers, which the stop ends too (docs/design.md, "Per-cluster cost").
func TestStoppedRuntimeLeavesNoGoroutineAndAnIdleOneFew(t *testing.T) {
	cp := cpA
	if cp == nil {
		t.Skip("integration test: needs the local control plane (not started with -short)")
	}
	ns := fmt.Sprintf("idle-cost-%d", time.Now().UnixNano())
	_, err := cp.Client().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	metrics, err := gc.NewMetrics(nil)
	require.NoError(t, err)
	base := settledGoroutines()

	rt, err := NewRuntime(Spec{Name: "idle", Config: cp.RESTConfig()}, RuntimeOptions{Namespace: ns, Dispatcher: okDispatcher{},
		Watch:  WatchOptions{ReplicaSets: true, Resync: time.Hour},
		GC:     &SweepOptions{Interval: time.Hour, Options: gc.Options{MinAge: time.Hour}, Metrics: metrics},
		Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rt.Run(ctx) }()
	controlplane.Eventually(t, 30*time.Second, "caches in sync", func() error {
		if !rt.Synced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	rt.Sweeper.Trigger(ns) // due in gc.DefaultTriggerDelay: a timer at the stop
	// Fewer than 20 (issue 26's goal per idle cluster): the watches of ReplicaSets and
	// ConfigMaps, 7 goroutines each (client-go's reflector, watch stream, HTTP/2 stream,
	// resync, queue pop and informer stop, and the cache's lean relay), the watchers' two
	// loops, the periodic sweeper and the connection: 18. No handler registration costs a
	// goroutine (cache.lightInformer), and the Deployment, Rollout and user informers start
	// only once the cluster needs them (cache.lazyListers, cache.lazyUsers).
	const budget = 19
	controlplane.Eventually(t, 30*time.Second, "the start-up replays done", func() error {
		if rt.Sweeper.IsLeader() && len(rt.Caches) == 1 && rt.Caches[0].HasSynced() {
			return nil
		}
		return fmt.Errorf("not started")
	})
	controlplane.Eventually(t, 30*time.Second, "the idle cluster within its budget", func() error {
		// Eventually: a timer's goroutine at work (the Rollout API's look) is not the cost.
		n := settledGoroutines() - base
		t.Logf("the idle cluster runs %d goroutines", n)
		if n > budget {
			return fmt.Errorf("%d goroutines for an idle cluster, budget %d", n, budget)
		}
		return nil
	})

	stop()
	<-done
	controlplane.Eventually(t, 30*time.Second, "goroutines back to before the runtime", func() error {
		// Slack for the HTTP/2 connection client-go keeps for the cluster's address.
		if n := settledGoroutines(); n > base+2 {
			return fmt.Errorf("%d goroutines after the stop, %d before the runtime", n, base)
		}
		return nil
	})
}

func settledGoroutines() int {
	runtime.GC()
	time.Sleep(200 * time.Millisecond)
	return runtime.NumGoroutine()
}
