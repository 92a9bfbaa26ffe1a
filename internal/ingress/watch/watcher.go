// Package watch holds the level-triggered ways in, two components on one queue machine
// (Watcher): the ReplicaSet way in (NewReplicaSets: every ReplicaSet of an informer, the
// built-in watcher for clusters without Argo Events) and, on every way in, the revision
// side (NewRevisions: every ConfigMap or Secret that appears or loses owners), so that a
// revision created after its ReplicaSet, or whose ownerReferences were wiped, is attached
// from its own change (docs/design.md, safety rule 9, "The revision side"). Both feed the
// dispatcher (package dispatch).
package watch

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// a spec); nil means the service's defaults, which the dispatcher applies.
	Options *core.Options
	// Workers is the number of objects handled at once; default DefaultWorkers.
	Workers int
	// Resync is how long after a replay of every cached object (at start, then
	// periodically) the next one begins, so that anything missed is repaired (the
	// periodic repair); default 10 minutes, negative: only the start-up replay.
	Resync time.Duration
	// MaxRetries bounds the retries of a transient failure per object before it waits
	// for the next resync; default 10.
	MaxRetries int
	// StopGrace is how long work in progress may go on once Run's context ends (serve's
	// --shutdown-timeout); default StopGrace.
	StopGrace time.Duration
	Logger    *slog.Logger
}

// Watcher is the queue machine of a way in: it feeds every object of its feeds'
// informers to the dispatcher, one queue for all. It plays no role of its own: its feeds
// decide what is queued and what is dispatched (NewReplicaSets, NewRevisions). It is
// level-triggered: once the informers have synced, every cached object is replayed
// (events missed while the service was down are repaired), a periodic resync replays
// them all again, and the core's idempotence makes those replays cost no write (and,
// served from the caches, no request). The queue has two lanes (lanes): changes seen
// after start, and retries, go before those replays, which are fed a few at a time.
type Watcher struct {
	feeds map[string]feed // by kind, the key prefix
	d     Dispatcher
	opts  Options
	spec  core.Options
	log   *slog.Logger
	queue workqueue.TypedRateLimitingInterface[string]
	lanes *lanes
	addMu sync.Mutex // pairs a lane mark with its queue.Add

	mu       sync.Mutex
	handled  int64
	replayed chan struct{} // closed once the start-up replay is handled (Replayed)
	resync   struct {      // the periodic repair's timer (resyncs)
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
		again   bool // a pass was asked for (Replay)
	}
}

// feed is one informer of a Watcher and its role's rules for its objects.
type feed interface {
	informer() toolscache.SharedIndexInformer
	// admit reports whether an object that appears (an add after the initial list, or
	// a replayed one) is queued.
	admit(obj any) bool
	// relevant reports whether an update is queued.
	relevant(old, obj any) bool
	// request is the dispatch request of a cached object of the feed, not terminating.
	request(base dispatch.Request, m metav1.Object) dispatch.Request
}

// nudged is a feed whose objects the changes of another informer queue too: the revision
// side's config objects at their first use (revisionFeed.firstUses). nudgedBy returns
// that informer (nil: none) and which of the feed's cached objects an added or changed
// object of it queues.
type nudged interface {
	nudgedBy() (toolscache.SharedIndexInformer, func(obj any) []any)
}

// StopGrace is Options.StopGrace's default: how long a stopping watcher lets the attaches
// in progress finish before cancelling them (a cancelled attach is safe: its patch was
// sent whole or not at all).
const StopGrace = 5 * time.Second

// DefaultWorkers is Options.Workers' default. Each worker's attach is a GET and a PATCH
// in series, and in a burst the apiserver shares its time among the requests in flight:
// the ReplicaSets' creator and the watcher. With 48 the watcher keeps pace with the
// creates in dev runs (bench/README.md, "Issue 19, pace"; 16 fell behind by a
// quarter to a half); with --kube-api-qps raised: at 50 QPS the client limiter decides.
const DefaultWorkers = 48

// newWatcher returns a Watcher over feeds (by kind; nil entries are left out), feeding
// d, its logs tagged with component. Errors: no dispatcher, or nothing to watch.
func newWatcher(component string, feeds map[string]feed, d Dispatcher, opts Options) (*Watcher, error) {
	for kind, f := range feeds {
		if f == nil || f.informer() == nil {
			delete(feeds, kind)
		}
	}
	if len(feeds) == 0 || d == nil {
		return nil, fmt.Errorf("watch: the %s need an informer and a dispatcher", component)
	}
	var spec core.Options // zero: the dispatcher applies the service's defaults
	if opts.Options != nil {
		spec = *opts.Options
	}
	opts = opts.withDefaults()
	w := &Watcher{feeds: feeds, d: d, opts: opts, spec: spec, log: opts.Logger.With("component", component),
		lanes: newLanes(opts.Workers / 4), replayed: make(chan struct{})}
	const name = "configmap-attacher-watch"
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Queue: w.lanes})
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name,
			DelayingQueue: newTimerDelaying(base)})
	return w, nil
}

// withDefaults fills the options left zero.
func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Resync == 0 {
		o.Resync = 10 * time.Minute
	}
	if o.MaxRetries <= 0 {
		o.MaxRetries = 10
	}
	if o.StopGrace <= 0 {
		o.StopGrace = StopGrace
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Replayed is closed once the start-up replay has been handled: every object cached at
// start was dispatched once (a retried one is back in the urgent lane by then).
func (w *Watcher) Replayed() <-chan struct{} { return w.replayed }

// Handled returns how many objects the watcher has processed (for tests and logs).
func (w *Watcher) Handled() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handled
}

// Run registers the handlers, waits for the informers to sync (the informers themselves
// are started by their owner, e.g. cache.Cache.Run), then processes objects until ctx
// ends. On shutdown queued objects are dropped (the watcher is level-triggered) and
// those in progress get StopGrace to finish. It returns nil.
func (w *Watcher) Run(ctx context.Context) error {
	var synced []toolscache.InformerSynced
	for kind, f := range w.feeds {
		inf := f.informer()
		reg, err := inf.AddEventHandler(w.handler(kind, f))
		if err != nil {
			return fmt.Errorf("watcher: adding the %s handler: %w", kind, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
		if remove, err := w.addNudges(kind, f); err != nil {
			return err
		} else if remove != nil {
			defer remove()
		}
	}
	defer w.queue.ShutDown()
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil // shutting down before sync
	}
	w.log.Info("watching", "kinds", w.kinds(), "workers", w.opts.Workers, "resync", w.opts.Resync)

	// Work outlives ctx by at most Options.StopGrace: a stop (shutdown, or the cluster being
	// removed) must not wait on requests to an apiserver that no longer answers.
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	// The start-up pass begins before the first key is taken: a change the workers
	// handle before the pass reads the stores is not replayed again.
	w.lanes.beginPass()
	replaying := make(chan struct{})
	go func() { defer close(replaying); w.replayLoop(ctx) }()
	defer func() { <-replaying; w.stopResyncs() }() // a replay stops with ctx (lanes.waitRoom): Run outlives it
	defer w.stopOnDone(ctx, cancelWork)()
	w.runWorkers(ctx, work) // until the queue is shut down, then the keys in progress
	return nil
}

// stopOnDone shuts the queue down once ctx (Run's) has ended and gives the work in
// progress StopGrace before cancelWork. Queued objects are dropped, not drained: the
// watcher is level-triggered, and the next start (or another replica's resync) handles
// them; with ctx done, workers take no new item (ShutDown alone would hand out the rest).
// It is a callback on ctx, not a goroutine waiting for it, so that the workers' loop runs
// on Run's own goroutine (docs/design.md, "Per-cluster cost"). release, once the workers
// have returned, stops the grace's timer.
func (w *Watcher) stopOnDone(ctx context.Context, cancelWork context.CancelFunc) (release func()) {
	var mu sync.Mutex
	var grace *time.Timer
	finished := false
	stop := context.AfterFunc(ctx, func() {
		w.queue.ShutDown()
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			grace = time.AfterFunc(w.opts.StopGrace, cancelWork)
		}
	})
	return func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		finished = true
		if grace != nil {
			grace.Stop()
		}
	}
}

func (w *Watcher) kinds() []string {
	out := make([]string, 0, len(w.feeds))
	for k := range w.feeds {
		out = append(out, k)
	}
	return out
}

// replayLoop replays every cached object at start (the informers' initial lists: what
// happened while the service was down is repaired) and then arms the periodic repair
// (resyncs).
func (w *Watcher) replayLoop(ctx context.Context) {
	start := time.Now()
	n := w.replayPass(ctx)
	if !w.lanes.waitRoom(ctx, 1) { // every replayed key handled
		return
	}
	w.log.Info("start-up replay done", "objects", n, "took", time.Since(start).Round(time.Millisecond))
	close(w.replayed)
	w.resyncs(ctx)
}

// resyncs replays every cached object Options.Resync after the previous replay was fed
// (never with a negative Resync), and at once when Replay asks, until ctx ends or
// stopResyncs. Between passes it is a timer, not a goroutine (an idle watcher waits for
// its next resync at no cost: docs/design.md, "Per-cluster cost").
func (w *Watcher) resyncs(ctx context.Context) {
	w.resync.mu.Lock()
	defer w.resync.mu.Unlock()
	if w.resync.stopped || ctx.Err() != nil {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(w.resyncDelay(), func() {
		w.resync.mu.Lock() // held during the pass: stopResyncs waits for it
		defer w.resync.mu.Unlock()
		if w.resync.stopped || ctx.Err() != nil {
			return
		}
		w.resync.again = false
		start := time.Now()
		n := w.replayPass(ctx)
		w.log.Debug("resync queued", "objects", n, "took", time.Since(start).Round(time.Millisecond))
		if w.opts.Resync > 0 {
			t.Reset(w.opts.Resync)
		}
	})
	if w.opts.Resync <= 0 && !w.resync.again {
		t.Stop() // armed by Replay only
	}
	w.resync.t = t
}

// resyncDelay is how long the first resync waits: none when Replay asked for one, and
// for ever (the timer is stopped at once) without periodic resyncs.
func (w *Watcher) resyncDelay() time.Duration {
	switch {
	case w.resync.again:
		return 0
	case w.opts.Resync <= 0:
		return math.MaxInt64
	}
	return w.opts.Resync
}

// Replay asks for one more pass over every cached object, as a resync's: at once, or
// once the start-up replay is done if it is not. It is for what the feeds decide from
// that has just become complete: the revision side's Listed once the cache's Deployment
// and Rollout informers, started on demand, have synced (cache.Cache.OnListersSynced).
// It does nothing once the watcher has stopped.
func (w *Watcher) Replay() {
	w.resync.mu.Lock()
	defer w.resync.mu.Unlock()
	w.resync.again = true
	if w.resync.t != nil && !w.resync.stopped {
		w.resync.t.Reset(0)
	}
}

// LookAgain queues, in the urgent lane, the cached objects of keys (core.UsesKey) that
// their feed admits. It is for what the feeds decide from that has just become complete:
// the revision side's Listed once the cache's Deployment or Rollout informer, started on
// demand, has synced, with the config objects that informer's workloads list
// (cache.Cache.OnListersSynced). Unlike Replay it looks at those objects only. It does
// nothing once the watcher has stopped.
func (w *Watcher) LookAgain(keys []string) {
	for _, key := range keys {
		kind, namespace, name, ok := core.SplitUsesKey(key)
		if !ok {
			continue
		}
		f := w.feeds[string(kind)]
		if f == nil {
			continue
		}
		obj, exists, err := f.informer().GetStore().GetByKey(namespace + "/" + name)
		if err == nil && exists && f.admit(obj) {
			w.add(string(kind), obj, false)
		}
	}
}

// stopResyncs stops the periodic repair, once ctx (Run's) has ended: it waits for a pass
// under way, which stops with ctx (lanes.waitRoom).
func (w *Watcher) stopResyncs() {
	w.resync.mu.Lock()
	defer w.resync.mu.Unlock()
	w.resync.stopped = true
	if w.resync.t != nil {
		w.resync.t.Stop()
	}
}

// replayPass queues every cached object in the replay lane, a few ahead of the workers
// (lanes.waitRoom): the keys of a pass are the stores' own, read one at a time, so a
// replay of N objects holds O(workers) queued keys, not N. An object taken from the
// urgent lane since the pass began is skipped (handled after the pass's snapshot). It
// returns the number queued.
func (w *Watcher) replayPass(ctx context.Context) int {
	w.lanes.beginPass()
	defer w.lanes.endPass()
	depth, n := 2*w.lanes.slots.limit, 0
	for kind, f := range w.feeds {
		store := f.informer().GetStore()
		keys := store.ListKeys()
		slices.Sort(keys) // namespace by namespace, in name order
		for _, key := range keys {
			if !w.lanes.waitRoom(ctx, depth) {
				return n
			}
			obj, exists, err := store.GetByKey(key)
			if err != nil || !exists || w.lanes.handledInPass(kind+"/"+key) {
				continue
			}
			if f.admit(obj) && w.add(kind, obj, true) {
				n++
			}
		}
	}
	return n
}

// handler queues the informer's changes in the urgent lane: every add after its
// initial list that f admits, and every update f finds relevant. The initial list itself
// is replayed by replayPass once the informers have synced.
func (w *Watcher) handler(kind string, f feed) toolscache.ResourceEventHandlerDetailedFuncs {
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList && f.admit(obj) {
				w.add(kind, obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			if f.relevant(old, obj) {
				w.add(kind, obj, false)
			}
		},
	}
}

// addNudges registers the handler that queues f's objects on the changes of the
// informer it is nudged by (nudged), if any: in the urgent lane, for every add after the
// initial list, every update that can change what an object needs (relevantUpdate) and
// every delete (the objects it alone held are the garbage collector's from then on).
// The sync of that informer is not waited for: the feed's own replay covers what was
// there at start. remove unregisters it.
func (w *Watcher) addNudges(kind string, f feed) (remove func(), err error) {
	n, ok := f.(nudged)
	if !ok {
		return nil, nil
	}
	inf, objects := n.nudgedBy()
	if inf == nil {
		return nil, nil
	}
	queue := func(obj any) {
		for _, o := range objects(obj) {
			w.add(kind, o, false)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList {
				queue(obj)
			}
		},
		UpdateFunc: func(old, obj any) {
			if relevantUpdate(old, obj) {
				queue(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			queue(obj)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watcher: adding the %s first-use handler: %w", kind, err)
	}
	return func() { _ = inf.RemoveEventHandler(reg) }, nil
}

// add queues obj unless it is terminating: in the replay lane when replay is set (and
// obj is not queued urgent already), else in the urgent lane (moving it there if it
// waits in the replay lane).
func (w *Watcher) add(kind string, obj any, replay bool) bool {
	m, ok := obj.(metav1.Object)
	if !ok || m.GetDeletionTimestamp() != nil {
		return false
	}
	key, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return false
	}
	key = kind + "/" + key
	w.addMu.Lock()
	defer w.addMu.Unlock()
	if replay {
		w.lanes.demote(key)
	} else {
		w.lanes.promote(key)
	}
	w.queue.Add(key)
	return true
}

// processNext handles the queued key under work; once ctx (Run's) has ended it drops
// the key. The answer decides: a retryable one is requeued with backoff up
// to MaxRetries (then given up until the next resync, and counted), any other is done.
func (w *Watcher) processNext(ctx, work context.Context, key string) {
	defer w.queue.Done(key)
	defer w.lanes.replayDone(key)
	if ctx.Err() != nil {
		return // stopping: dropped, the watcher is level-triggered (the next start handles it)
	}
	req, a := w.handle(work, key)
	w.mu.Lock()
	w.handled++
	w.mu.Unlock()
	switch {
	case !a.Class.Retryable():
		w.queue.Forget(key)
	case w.queue.NumRequeues(key) < w.opts.MaxRetries:
		w.queue.AddRateLimited(key)
	default:
		w.d.GaveUp(req.Path, req.Event, "max-retries", a.Err) // the next resync tries again
		w.queue.Forget(key)
	}
}

// handle dispatches the cached object of key (gone or terminating: nothing to do).
func (w *Watcher) handle(ctx context.Context, key string) (dispatch.Request, dispatch.Answer) {
	kind, objKey, _ := strings.Cut(key, "/")
	done := dispatch.Answer{Class: dispatch.ClassOK}
	f := w.feeds[kind]
	if f == nil {
		return dispatch.Request{}, done
	}
	obj, exists, err := f.informer().GetStore().GetByKey(objKey)
	if err != nil || !exists {
		return dispatch.Request{}, done
	}
	m, ok := obj.(metav1.Object)
	if !ok || m.GetDeletionTimestamp() != nil {
		return dispatch.Request{}, done
	}
	ev := core.Event{Cluster: w.opts.Cluster, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
	// A key from the replay lane takes one of the dispatcher's replay share of slots too:
	// the replays of every cluster together never take the slots live events need.
	req := f.request(dispatch.Request{Path: dispatch.PathWatcher, Options: w.spec, Event: ev, Replay: w.lanes.replaying(key)}, m)
	return req, w.d.Dispatch(ctx, req)
}
