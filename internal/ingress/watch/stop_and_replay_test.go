package watch

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Breaker s6: once the watcher's context has ended, a replay pass stops feeding. With
// room in the replay lane waitRoom answered "go on" whatever ctx said, and after the
// queue's ShutDown every add is a no-op that never fills the lane: a pass cut by a stop
// (shutdown, or its cluster removed) ran on through every cached key after Run had
// returned, leaving a demote mark per key, and closed Replayed as if it were done.
func TestWaitRoomEndsWithItsContext(t *testing.T) {
	l := newLanes(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.False(t, l.waitRoom(ctx, 2), "room in the lane, but the context has ended")
}

// Breaker s6: a pass that starts or goes on once the watcher has stopped (its context
// ended, its queue shut down) queues nothing and marks nothing: on main it read every
// cached key, counted each as queued (the add was a no-op) and left a demote mark per key.
func TestReplayPassAfterTheStopQueuesNothing(t *testing.T) {
	const n = 200
	inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Apps().V1().ReplicaSets().Informer()
	for i := range n {
		require.NoError(t, inf.GetStore().Add(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("rs-%03d", i)}}))
	}
	d := dispatcherFunc(func(context.Context, dispatch.Request) dispatch.Answer {
		return dispatch.Answer{Class: dispatch.ClassOK}
	})
	w, err := NewReplicaSets(inf, d, Options{Workers: 8, Resync: -1, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w.queue.ShutDown() // what Run does once ctx has ended
	assert.Zero(t, w.replayPass(ctx), "keys counted as queued after the stop")
	w.lanes.mu.Lock()
	defer w.lanes.mu.Unlock()
	assert.Zero(t, len(w.lanes.marks.replay), "marks left for adds the stopped queue dropped")
}

// Breaker s6: a stop during the start-up replay cuts it: Run returns after its replay
// has stopped, the replay is not reported done (Replayed stays open) and the pass left no
// marks for keys it could no longer queue.
func TestStopCutsTheStartupReplay(t *testing.T) {
	const n = 200
	kc := fake.NewClientset()
	for i := range n {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("rs-%03d", i), UID: "u"}}
		_, err := kc.AppsV1().ReplicaSets("ns").Create(context.Background(), rs, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fac := informers.NewSharedInformerFactory(kc, 0)
	inf := fac.Apps().V1().ReplicaSets().Informer()
	infCtx, infCancel := context.WithCancel(context.Background())
	defer infCancel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var handled atomic.Int64
	d := dispatcherFunc(func(context.Context, dispatch.Request) dispatch.Answer {
		if handled.Add(1) == 3 {
			cancel() // stop in the middle of the start-up replay
		}
		return dispatch.Answer{Class: dispatch.ClassOK}
	})
	w, err := NewReplicaSets(inf, d, Options{Workers: 8, Resync: -1, Logger: testfix.Quiet()})
	require.NoError(t, err)
	fac.Start(infCtx.Done())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return")
	}
	select {
	case <-w.Replayed():
		t.Fatal("Replayed closed: a start-up replay cut by the stop was reported done")
	default:
	}
	w.lanes.mu.Lock()
	marks := len(w.lanes.marks.replay)
	w.lanes.mu.Unlock()
	assert.LessOrEqual(t, marks, 1, "keys the replay went on marking after the stop (of %d)", n)
	assert.Less(t, handled.Load(), int64(n))
}
