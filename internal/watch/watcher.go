// Package watch is the built-in way in for clusters without Argo Events: a ReplicaSet
// informer whose every ReplicaSet is dispatched (package dispatch), level-triggered.
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// Dispatcher is what the watcher feeds: *dispatch.Dispatcher satisfies it.
type Dispatcher interface {
	Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer
	GaveUp(path dispatch.Path, ev core.Event, reason string, err error)
}

// Options configure a Watcher.
type Options struct {
	// Cluster is the cluster name put on every event.
	Cluster string
	// Options are the effective options of every event (the dispatcher's ParseSpec of
	// the service's spec); zero means core.DefaultOptions.
	Options *core.Options
	// Workers is the number of ReplicaSets handled at once; default DefaultWatcherWorkers.
	Workers int
	// Resync is how often every cached ReplicaSet is queued again, so that anything
	// missed (a failed write, a revision created after its ReplicaSet) is repaired;
	// default 10 minutes, negative disables.
	Resync time.Duration
	// MaxRetries bounds the retries of a transient failure per ReplicaSet before it waits
	// for the next resync; default 10.
	MaxRetries int
	Logger     *slog.Logger
}

// Watcher is the built-in event source for clusters without Argo Events: it feeds every
// ReplicaSet of a shared informer to the core. It is level-triggered: the informer's
// initial list backfills every existing ReplicaSet at start (events missed while the
// service was down are repaired), a periodic resync queues them all again, and the
// core's idempotence makes those replays cost no write.
type Watcher struct {
	inf   toolscache.SharedIndexInformer
	d     Dispatcher
	opts  Options
	spec  core.Options
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string]

	mu      sync.Mutex
	handled int64
}

// StopGrace is how long a stopping watcher lets the attaches in progress finish before
// cancelling them (a cancelled attach is safe: its patch was sent whole or not at all).
const StopGrace = 5 * time.Second

// DefaultWorkers is Options.Workers' default.
// 16 measured best in `make bench` (burst attach rate 135/s at 4, 194/s at 16, no gain at
// 32), with --kube-api-qps raised; at the default 50 QPS the client limiter decides.
const DefaultWorkers = 16

// New returns a Watcher over inf (a ReplicaSet informer, typically
// cache.Cache.ReplicaSetInformer) feeding d. Errors: a nil argument.
func New(inf toolscache.SharedIndexInformer, d Dispatcher, opts Options) (*Watcher, error) {
	if inf == nil || d == nil {
		return nil, errors.New("watch: New needs an informer and a dispatcher")
	}
	spec := core.DefaultOptions()
	if opts.Options != nil {
		spec = *opts.Options
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.Resync == 0 {
		opts.Resync = 10 * time.Minute
	}
	if opts.MaxRetries <= 0 {
		opts.MaxRetries = 10
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{inf: inf, d: d, opts: opts, spec: spec, log: log.With("component", "watcher"),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "configmap-attacher-replicasets"})}
	return w, nil
}

// Handled returns how many ReplicaSets the watcher has processed (for tests and logs).
func (w *Watcher) Handled() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handled
}

// Run registers the handler, waits for the informer to sync (the informer itself is
// started by its owner, e.g. cache.Cache.Run), then processes ReplicaSets until ctx
// ends. On shutdown queued ReplicaSets are dropped (the watcher is level-triggered) and
// those in progress get StopGrace to finish. It returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	reg, err := w.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: w.enqueue,
		UpdateFunc: func(old, obj any) {
			if relevantUpdate(old, obj) {
				w.enqueue(obj)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watcher: adding the ReplicaSet handler: %w", err)
	}
	defer func() { _ = w.inf.RemoveEventHandler(reg) }()
	defer w.queue.ShutDown()
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return nil // shutting down before sync
	}
	w.log.Info("watching ReplicaSets", "workers", w.opts.Workers, "resync", w.opts.Resync)

	// Work outlives ctx by at most StopGrace: a stop (shutdown, or the cluster being
	// removed) must not wait on requests to an apiserver that no longer answers.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	var wg sync.WaitGroup
	for i := 0; i < w.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for w.processNext(ctx, work) {
			}
		}()
	}
	if w.opts.Resync > 0 {
		go wait.Until(func() {
			for _, obj := range w.inf.GetStore().List() {
				w.enqueue(obj)
			}
		}, w.opts.Resync, ctx.Done())
	}
	<-ctx.Done()
	// Queued ReplicaSets are dropped, not drained: the watcher is level-triggered, and the
	// next start (or another replica's resync) handles them.
	w.queue.ShutDown() // with ctx done, workers take no new item (ShutDown alone would hand out the rest)
	stop := time.AfterFunc(StopGrace, cancelWork)
	defer stop.Stop()
	wg.Wait()
	return nil
}

// relevantUpdate reports whether an update can change what a ReplicaSet needs: its spec
// (generation), owners, labels or annotations. Status-only updates (replica counts, the
// ReplicaSet controller's frequent writes) are skipped: they would re-run an attach that
// already happened, and the watcher's own resync repairs anything missed.
func relevantUpdate(old, obj any) bool {
	o, ok1 := old.(*appsv1.ReplicaSet)
	n, ok2 := obj.(*appsv1.ReplicaSet)
	if !ok1 || !ok2 {
		return true
	}
	return o.UID != n.UID || o.Generation != n.Generation ||
		!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations)
}

func (w *Watcher) enqueue(obj any) {
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || rs.DeletionTimestamp != nil {
		return
	}
	key, err := toolscache.MetaNamespaceKeyFunc(rs)
	if err == nil {
		w.queue.Add(key)
	}
}

// processNext handles one queued ReplicaSet under work; once ctx (Run's) has ended it
// takes no new item. The answer decides: a retryable one is requeued with backoff up
// to MaxRetries (then given up until the next resync, and counted), any other is done.
func (w *Watcher) processNext(ctx, work context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	if ctx.Err() != nil {
		return false // stopping: dropped, the watcher is level-triggered (the next start handles it)
	}
	ev, a := w.handle(work, key)
	class := a.Class
	w.mu.Lock()
	w.handled++
	w.mu.Unlock()
	switch {
	case !class.Retryable():
		w.queue.Forget(key)
	case w.queue.NumRequeues(key) < w.opts.MaxRetries:
		w.queue.AddRateLimited(key)
	default:
		w.d.GaveUp(dispatch.PathWatcher, ev, "max-retries", a.Err) // the next resync tries again

		w.queue.Forget(key)
	}
	return true
}

// handle dispatches the cached ReplicaSet of key (gone or terminating: nothing to do).
func (w *Watcher) handle(ctx context.Context, key string) (core.Event, dispatch.Answer) {
	obj, exists, err := w.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return core.Event{}, dispatch.Answer{Class: dispatch.ClassOK}
	}
	rs, ok := obj.(*appsv1.ReplicaSet)
	if !ok || rs.DeletionTimestamp != nil {
		return core.Event{}, dispatch.Answer{Class: dispatch.ClassOK}
	}
	ev := core.Event{Cluster: w.opts.Cluster, Namespace: rs.Namespace, Name: rs.Name, UID: rs.UID}
	return ev, w.d.Dispatch(ctx, dispatch.Request{Path: dispatch.PathWatcher, Options: w.spec, Event: ev})
}
