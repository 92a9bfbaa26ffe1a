package watch_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/watch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// recordingDispatcher records the ReplicaSets dispatched, in order; its first call runs
// during (at the very start of) the start-up replay and calls during once.
type recordingDispatcher struct {
	during func(ctx context.Context) error
	mu     sync.Mutex
	order  []string
	err    error
}

func (d *recordingDispatcher) Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer {
	d.mu.Lock()
	first := len(d.order) == 0
	d.order = append(d.order, req.Event.Name)
	d.mu.Unlock()
	if first {
		err := d.during(ctx)
		d.mu.Lock()
		d.err = err
		d.mu.Unlock()
	}
	return dispatch.Answer{Class: dispatch.ClassOK}
}

func (d *recordingDispatcher) GaveUp(dispatch.Path, core.Event, string, error) {}

func (d *recordingDispatcher) seen() ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.order...), d.err
}

// A change made while the watcher replays its start-up list (a real apiserver's watch
// event, isInInitialList false) is handled before the rest of the replay, and every
// ReplicaSet is handled exactly once. The replay is fed a few keys ahead of the worker:
// the queue never holds the whole list. One worker, held on the first replayed object
// until the change is queued, makes the replay as long as the test needs: no timing.
func TestChangeDuringReplayGoesFirst(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	const replayed = 20
	cases := []struct {
		name   string
		change func(ctx context.Context, kc kubernetes.Interface, ns string) error
		first  string // handled right after the first replayed object
		want   int    // distinct ReplicaSets handled in all
	}{
		{"created during the replay", func(ctx context.Context, kc kubernetes.Interface, ns string) error {
			_, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, testfix.ReplicaSet("new", "cfg"), metav1.CreateOptions{})
			return err
		}, "new", replayed + 1},
		{"changed while waiting in the replay", func(ctx context.Context, kc kubernetes.Interface, ns string) error {
			// On conflict again: the ReplicaSet controller writes a new ReplicaSet's status.
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				rs, err := kc.AppsV1().ReplicaSets(ns).Get(ctx, fmt.Sprintf("rs-%02d", replayed-1), metav1.GetOptions{})
				if err != nil {
					return err
				}
				rs.Labels = map[string]string{"changed": "true"}
				_, err = kc.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
				return err
			})
		}, fmt.Sprintf("rs-%02d", replayed-1), replayed},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := testfix.CreateNamespaceFor(t, kc, fmt.Sprintf("watch-lanes-%d", i))
			for j := range replayed {
				testfix.CreateReplicaSet(t, kc, ns, fmt.Sprintf("rs-%02d", j), "cfg")
			}
			// The informer's first list is served by the apiserver's watch cache, which may
			// not hold the last ReplicaSets created yet: one it lacks arrives as a change
			// (rightly handled first) and the replay under test would start elsewhere.
			controlplane.Eventually(t, time.Minute, "the watch cache to hold every ReplicaSet", func() error {
				list, err := kc.AppsV1().ReplicaSets(ns).List(context.Background(), metav1.ListOptions{ResourceVersion: "0"})
				if err != nil {
					return err
				}
				if len(list.Items) != replayed {
					return fmt.Errorf("%d of %d", len(list.Items), replayed)
				}
				return nil
			})
			fac := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
			inf := fac.Apps().V1().ReplicaSets().Informer()
			var w *watch.Watcher
			var queued atomic.Int64
			var sawChange atomic.Bool // the informer delivered the change (diagnostics)
			_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(obj any) { sawChange.CompareAndSwap(false, isChange(obj)) },
				UpdateFunc: func(_, obj any) { sawChange.CompareAndSwap(false, isChange(obj)) },
			})
			d := &recordingDispatcher{}
			d.during = func(ctx context.Context) error {
				if err := tc.change(ctx, kc, ns); err != nil {
					return err
				}
				// Hold the only worker until the watch event is queued (urgent), with the
				// rest of the replay still waiting.
				err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
					return w.Urgent() >= 1, nil
				})
				queued.Store(int64(w.Queued()))
				if err != nil {
					order, _ := d.seen()
					return fmt.Errorf("the change was not queued urgent: urgent %d, queued %d, handling %v, the informer saw it: %v: %w",
						w.Urgent(), w.Queued(), order, sawChange.Load(), err)
				}
				select {
				case <-w.Replayed():
					return errors.New("Replayed closed while a replayed object is being handled")
				default:
				}
				return err
			}
			var err error
			w, err = watch.NewReplicaSets(inf, d, watch.Options{Workers: 1, Resync: -1, Logger: testfix.Quiet()})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fac.Start(ctx.Done())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			controlplane.Eventually(t, time.Minute, "every ReplicaSet handled", func() error {
				if got := w.Handled(); got < int64(tc.want) {
					return fmt.Errorf("%d of %d handled", got, tc.want)
				}
				return nil
			})
			order, derr := d.seen()
			require.NoError(t, derr, "the change during the replay")
			require.GreaterOrEqual(t, len(order), 2)
			assert.Equal(t, tc.first, order[1], "the change goes before the rest of the replay: %v", order)
			assert.LessOrEqual(t, queued.Load(), int64(3), "queued during the replay: the change and a few replayed keys, not all %d", replayed)
			counts := map[string]int{}
			for _, name := range order {
				counts[name]++
			}
			assert.Len(t, counts, tc.want, "every ReplicaSet handled: %v", order)
			for name, n := range counts {
				assert.Equal(t, 1, n, "%s handled once: %v", name, order)
			}
			assert.Zero(t, w.Queued())
			select {
			case <-w.Replayed():
			case <-time.After(time.Minute):
				t.Fatal("Replayed not closed after the start-up replay was handled")
			}
			cancel()
			require.NoError(t, <-done)
		})
	}
}

// The start-up replay dispatches every cached ReplicaSet once, and the periodic resync
// waits its interval after it (it does not start over at once).
func TestStartupReplayHandlesEachObjectOnce(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	const n = 30
	ns := "watch-replay-once"
	testfix.CreateNamespace(t, kc, ns)
	for j := range n {
		testfix.CreateReplicaSet(t, kc, ns, fmt.Sprintf("rs-%02d", j), "cfg")
	}
	fac := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	inf := fac.Apps().V1().ReplicaSets().Informer()
	d := &recordingDispatcher{during: func(context.Context) error { return nil }}
	w, err := watch.NewReplicaSets(inf, d, watch.Options{Workers: 4, Resync: time.Hour, Logger: testfix.Quiet()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fac.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case <-w.Replayed():
	case <-time.After(time.Minute):
		t.Fatal("the start-up replay did not finish")
	}
	assert.Never(t, func() bool { return w.Handled() != n }, time.Second, 20*time.Millisecond,
		"each of the %d ReplicaSets handled once, no second pass right after the first", n)
	order, _ := d.seen()
	assert.Len(t, order, n)
	cancel()
	require.NoError(t, <-done)
}

// isChange reports whether obj is the test's change: the ReplicaSet created during the
// replay, or one labelled changed=true.
func isChange(obj any) bool {
	m, ok := obj.(metav1.Object)
	return ok && (m.GetName() == "new" || m.GetLabels()["changed"] == "true")
}
