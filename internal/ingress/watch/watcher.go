// Package watch is the level-triggered way in: every ReplicaSet of an informer (the
// built-in watcher, for clusters without Argo Events) and, on every way in, the revision
// side: every ConfigMap or Secret that appears or loses owners is dispatched (package
// dispatch), so that a revision created after its ReplicaSet, or whose ownerReferences
// were wiped, is attached from its own change (docs/design.md, safety rule 9).
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
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
	// the service's spec); zero means core.DefaultOptions.
	Options *core.Options
	// Revisions are metadata informers of config objects (cache.Cache.RevisionInformers):
	// each object that appears, gains the opt-in label or loses an owner is dispatched
	// as a revision event.
	Revisions map[core.Kind]toolscache.SharedIndexInformer
	// Listed, when set, reports whether a cached workload lists a config object by name
	// (cache.Cache.Listed): such an unlabelled object is a candidate too, so that one
	// created after its ReplicaSet is attached at once.
	Listed func(kind core.Kind, namespace, name string) bool
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

// Watcher feeds every object of its informers to the dispatcher, one queue for all. It
// is level-triggered: once the informers have synced, every cached object is replayed
// (events missed while the service was down are repaired), a periodic resync replays
// them all again, and the core's idempotence makes those replays cost no write (and,
// served from the caches, no request). The queue has two lanes (lanes): changes seen
// after start, and retries, go before those replays, which are fed a few at a time.
type Watcher struct {
	sources map[string]toolscache.SharedIndexInformer // by kind: ReplicaSet, ConfigMap, Secret
	d       Dispatcher
	opts    Options
	spec    core.Options
	log     *slog.Logger
	queue   workqueue.TypedRateLimitingInterface[string]
	lanes   *lanes
	addMu   sync.Mutex // pairs a lane mark with its queue.Add

	mu       sync.Mutex
	handled  int64
	replayed chan struct{} // closed once the start-up replay is handled (Replayed)
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

const kindReplicaSet = "ReplicaSet"

// New returns a Watcher over replicaSets (a ReplicaSet informer, typically
// cache.Cache.ReplicaSetInformer; nil for the revision side only) and opts.Revisions,
// feeding d. Errors: no dispatcher, or nothing to watch.
func New(replicaSets toolscache.SharedIndexInformer, d Dispatcher, opts Options) (*Watcher, error) {
	sources := map[string]toolscache.SharedIndexInformer{}
	if replicaSets != nil {
		sources[kindReplicaSet] = replicaSets
	}
	for kind, inf := range opts.Revisions {
		if inf != nil {
			sources[string(kind)] = inf
		}
	}
	if len(sources) == 0 || d == nil {
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
	if opts.StopGrace <= 0 {
		opts.StopGrace = StopGrace
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{sources: sources, d: d, opts: opts, spec: spec, log: log.With("component", "watcher"), lanes: newLanes(opts.Workers / 4),
		replayed: make(chan struct{})}
	const name = "configmap-attacher-watch"
	base := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: name, Queue: w.lanes})
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name,
			DelayingQueue: workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[string]{Name: name, Queue: base})})
	return w, nil
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
	for kind, inf := range w.sources {
		reg, err := inf.AddEventHandler(w.handler(kind))
		if err != nil {
			return fmt.Errorf("watcher: adding the %s handler: %w", kind, err)
		}
		defer func() { _ = inf.RemoveEventHandler(reg) }()
		synced = append(synced, reg.HasSynced)
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
	workers := make(chan struct{})
	go func() { defer close(workers); w.runWorkers(ctx, work) }()
	replaying := make(chan struct{})
	go func() { defer close(replaying); w.replayLoop(ctx) }()
	defer func() { <-replaying }() // the replay stops with ctx (lanes.waitRoom): Run outlives it
	<-ctx.Done()
	// Queued objects are dropped, not drained: the watcher is level-triggered, and the
	// next start (or another replica's resync) handles them.
	w.queue.ShutDown() // with ctx done, workers take no new item (ShutDown alone would hand out the rest)
	stop := time.AfterFunc(w.opts.StopGrace, cancelWork)
	defer stop.Stop()
	<-workers
	return nil
}

func (w *Watcher) kinds() []string {
	out := make([]string, 0, len(w.sources))
	for k := range w.sources {
		out = append(out, k)
	}
	return out
}

// replayLoop replays every cached object at start (the informers' initial lists: what
// happened while the service was down is repaired) and then every Options.Resync after
// the previous replay was fed (the periodic repair).
func (w *Watcher) replayLoop(ctx context.Context) {
	start := time.Now()
	n := w.replayPass(ctx)
	if !w.lanes.waitRoom(ctx, 1) { // every replayed key handled
		return
	}
	w.log.Info("start-up replay done", "objects", n, "took", time.Since(start).Round(time.Millisecond))
	close(w.replayed)
	if w.opts.Resync <= 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.opts.Resync):
		}
		start := time.Now()
		n := w.replayPass(ctx)
		w.log.Debug("resync queued", "objects", n, "took", time.Since(start).Round(time.Millisecond))
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
	depth, n := 2*w.lanes.replayCap, 0
	for kind, inf := range w.sources {
		store := inf.GetStore()
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
			if w.enqueue(kind, obj, true) {
				n++
			}
		}
	}
	return n
}

// handler queues the informer's changes in the urgent lane: every add after its
// initial list, and every relevant update. The initial list itself is replayed by
// replayPass once the informers have synced.
func (w *Watcher) handler(kind string) toolscache.ResourceEventHandlerDetailedFuncs {
	relevant := relevantUpdate
	if kind != kindReplicaSet {
		// An object that was a candidate stays one for this update (a PUT that wiped its
		// ownerReferences leaves an unlabelled, listed revision with none); one that
		// becomes one (gains the opt-in label) is one. The service's own owner additions
		// change neither labels nor lose an owner: not queued.
		relevant = func(old, obj any) bool {
			return revisionNeedsLook(old, obj) && (w.isCandidate(kind, old) || w.isCandidate(kind, obj))
		}
	}
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, isInInitialList bool) {
			if !isInInitialList {
				w.enqueue(kind, obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			if relevant(old, obj) {
				w.add(kind, obj, false)
			}
		},
	}
}

// relevantUpdate reports whether an update can change what a ReplicaSet needs: its spec
// (generation), owners, labels or annotations. Status-only updates (replica counts, the
// ReplicaSet controller's frequent writes) are skipped: they would re-run an attach that
// already happened, and the watcher's own resync repairs anything missed.
// It reads the objects through metav1.Object, so the cache's stored records (package
// cache) and Kubernetes objects alike are compared.
func relevantUpdate(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetUID() != n.GetUID() || o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}

// revisionNeedsLook reports whether an update of a config object may leave it short of
// owners: it lost one (a PUT without ownerReferences: kubectl replace, Argo CD
// Replace=true), was replaced by a namesake, or its labels or annotations changed
// (opted in). Data edits and the service's own owner additions are skipped.
func revisionNeedsLook(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	if o.GetUID() != n.GetUID() || !maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
		return true
	}
	kept := map[string]bool{}
	for _, r := range n.GetOwnerReferences() {
		kept[string(r.UID)] = true
	}
	for _, r := range o.GetOwnerReferences() {
		if !kept[string(r.UID)] {
			return true
		}
	}
	return false
}

// enqueue queues obj unless it is terminating or, for a config object, no candidate;
// it reports whether it did.
func (w *Watcher) enqueue(kind string, obj any, replay bool) bool {
	if kind != kindReplicaSet && !w.isCandidate(kind, obj) {
		return false
	}
	return w.add(kind, obj, replay)
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

// isCandidate reports whether the config object obj of kind may be a revision the
// revision side should look at: candidate, or a cached workload lists it by name
// (Options.Listed; an unlabelled object created after the ReplicaSet that lists it).
func (w *Watcher) isCandidate(kind string, obj any) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	return candidate(m) || (w.opts.Listed != nil && w.opts.Listed(core.Kind(kind), m.GetNamespace(), m.GetName()))
}

// candidate reports whether a config object may be a revision by its own metadata: it
// carries the opt-in label, a ReplicaSet owned it (it was attached, for example listed
// by a workload annotation, and may have lost owners since), or it has an owner of any
// kind the service adds (core.CollectorOwner: once owned, every live user is attached
// too). Other ConfigMaps and Secrets (kube-root-ca.crt, application config) are never
// queued, so they cost nothing and count nowhere.
func candidate(m metav1.Object) bool {
	if m.GetLabels()[core.LabelRevision] == "true" {
		return true
	}
	if _, held := core.CollectorOwner(m.GetOwnerReferences()); held {
		return true
	}
	for _, r := range m.GetOwnerReferences() {
		if r.Kind == kindReplicaSet {
			return true
		}
	}
	return false
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
	inf := w.sources[kind]
	if inf == nil {
		return dispatch.Request{}, done
	}
	obj, exists, err := inf.GetStore().GetByKey(objKey)
	if err != nil || !exists {
		return dispatch.Request{}, done
	}
	m, ok := obj.(metav1.Object)
	if !ok || m.GetDeletionTimestamp() != nil {
		return dispatch.Request{}, done
	}
	ev := core.Event{Cluster: w.opts.Cluster, Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()}
	req := dispatch.Request{Path: dispatch.PathWatcher, Options: w.spec, Event: ev}
	if kind != kindReplicaSet {
		req.Path = dispatch.PathRevision
		req.Revision = &core.RevisionEvent{Cluster: w.opts.Cluster, Kind: core.Kind(kind), Namespace: m.GetNamespace(),
			Name: m.GetName(), UID: m.GetUID()}
	}
	return req, w.d.Dispatch(ctx, req)
}
