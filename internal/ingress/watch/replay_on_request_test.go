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

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Replay (what the revision side is asked for once a cache's Deployment and Rollout
// informers, started on demand, have synced) dispatches every cached object once more,
// without periodic resyncs, whether it is asked for before the start-up replay is done
// (it comes after it) or after.
func TestReplayDispatchesEveryCachedObjectOnceMore(t *testing.T) {
	const n = 3
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("asked before the start-up replay: %v", early), func(t *testing.T) {
			kc := fake.NewClientset()
			for i := range n {
				rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("rs-%d", i), UID: "u"}}
				_, err := kc.AppsV1().ReplicaSets("ns").Create(context.Background(), rs, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			fac := informers.NewSharedInformerFactory(kc, 0)
			inf := fac.Apps().V1().ReplicaSets().Informer()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var handled atomic.Int64
			d := dispatcherFunc(func(context.Context, dispatch.Request) dispatch.Answer {
				handled.Add(1)
				return dispatch.Answer{Class: dispatch.ClassOK}
			})
			w, err := NewReplicaSets(inf, d, Options{Workers: 2, Resync: -1, Logger: testfix.Quiet()})
			require.NoError(t, err)
			if early {
				w.Replay()
			}
			fac.Start(ctx.Done())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			<-w.Replayed()
			if !early {
				require.Eventually(t, func() bool { return handled.Load() == n }, 10*time.Second, 5*time.Millisecond, "the start-up replay")
				w.Replay()
			}
			require.Eventually(t, func() bool { return handled.Load() == 2*n }, 10*time.Second, 5*time.Millisecond, "the replay asked for")
		})
	}
}
