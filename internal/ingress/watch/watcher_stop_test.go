package watch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// dispatcherFunc is a Dispatcher of one function (GaveUp does nothing).
type dispatcherFunc func(ctx context.Context, req dispatch.Request) dispatch.Answer

func (f dispatcherFunc) Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer {
	return f(ctx, req)
}
func (f dispatcherFunc) GaveUp(dispatch.Path, core.Event, string, error) {}

// slowAttacher takes 50 ms per ReplicaSet (or until its context ends) and counts the
// calls that start after stopped is set.
type slowAttacher struct {
	stopped    atomic.Bool
	calls      atomic.Int64
	afterStop  atomic.Int64
	cancelled  atomic.Int64
	firstStart chan struct{}
}

func (a *slowAttacher) Attach(ctx context.Context, ev core.Event) (core.Result, error) {
	if a.calls.Add(1) == 1 {
		close(a.firstStart)
	}
	if a.stopped.Load() {
		a.afterStop.Add(1)
	}
	if ctx.Err() != nil {
		a.cancelled.Add(1)
	}
	select {
	case <-ctx.Done():
		return core.Result{}, ctx.Err()
	case <-time.After(50 * time.Millisecond):
	}
	return core.Result{}, nil
}

// The watcher's stop is documented as dropping the queue (watcher.go Run: "Queued
// ReplicaSets are dropped, not drained"). client-go's workqueue ShutDown does not drop:
// Get keeps returning queued items until the queue is empty, so the workers keep
// attaching for StopGrace and then run every remaining item with a cancelled context.
func TestWatcherStopDropsQueue(t *testing.T) {
	const n = 300
	var objs []*appsv1.ReplicaSet
	kc := fake.NewClientset()
	for i := range n {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("rs-%d", i), UID: "u"}}
		objs = append(objs, rs)
		_, err := kc.AppsV1().ReplicaSets("ns").Create(context.Background(), rs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fac := informers.NewSharedInformerFactory(kc, 0)
	inf := fac.Apps().V1().ReplicaSets().Informer()
	infCtx, infCancel := context.WithCancel(context.Background())
	defer infCancel()
	att := &slowAttacher{firstStart: make(chan struct{})}
	var observedErrs atomic.Int64
	d := dispatcherFunc(func(ctx context.Context, req dispatch.Request) dispatch.Answer {
		_, err := att.Attach(ctx, req.Event)
		if err != nil {
			observedErrs.Add(1)
		}
		return dispatch.Answer{Class: dispatch.Classify(err), Err: err}
	})
	w, err := NewReplicaSets(inf, d, Options{Workers: 1, Resync: -1, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	fac.Start(infCtx.Done())
	select {
	case <-att.firstStart:
	case <-time.After(20 * time.Second):
		t.Fatal("no attach started")
	}
	att.stopped.Store(true)
	cancel()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Run did not return")
	}
	t.Logf("calls=%d afterStop=%d withCancelledCtx=%d observedErrors=%d", att.calls.Load(), att.afterStop.Load(), att.cancelled.Load(), observedErrs.Load())
	require.Zero(t, att.afterStop.Load(), "a stopped watcher started attaches for queued ReplicaSets")
	_ = objs
}
