package cache

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
)

// errLightInformer is what a lightInformer answers to the SharedInformer settings it does
// not take once built (its transform is given at construction).
var errLightInformer = errors.New("cache: not supported by the cache's informers")

// lightInformer is client-go's plain informer (toolscache.NewInformerWithOptions: a
// reflector, its queue and the loop that pops it into an indexer) with its handlers in
// one fanout: client-go's SharedIndexInformer would run a processor goroutine and two
// more for every handler registration, for the life of the informer, where this one
// calls its handlers on the goroutine that stored the change (docs/design.md,
// "Per-cluster cost"). It implements toolscache.SharedIndexInformer for the cache's
// readers and the watchers.
//
// Handlers are called in the informer's order, after the store holds the change, and
// must not block (the cache's and the watchers' only queue a key or wake a waiter): they
// run under client-go's queue lock, which the informer's HasSynced takes too, so a slow
// handler holds every HasSynced of its informer (/readyz, AwaitReplicaSet) and one that
// calls its own informer's HasSynced never returns. A
// handler added after the informer has started gets every change from then on; unlike
// client-go's late registration, it is not handed the objects stored already (its
// registration's HasSynced is the informer's): read them from the store, as the
// watcher's replay does.
type lightInformer struct {
	indexer toolscache.Indexer
	ctrl    toolscache.Controller
	fan     *fanout
	ran     atomic.Bool
	stopped atomic.Bool
}

var _ toolscache.SharedIndexInformer = (*lightInformer)(nil)

// newLightInformer is lw's informer of obj's type, indexed by namespace, with transform
// (nil: none) applied to every object before it is stored.
func newLightInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, transform toolscache.TransformFunc) *lightInformer {
	li := &lightInformer{fan: &fanout{}}
	store, ctrl := toolscache.NewInformerWithOptions(toolscache.InformerOptions{ListerWatcher: lw, ObjectType: obj,
		Handler: li.fan, ResyncPeriod: resync, Transform: transform,
		Indexers: toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}})
	li.indexer, li.ctrl = store.(toolscache.Indexer), ctrl
	li.fan.synced = ctrl.HasSynced
	return li
}

// AddEventHandler joins h to the informer's handlers.
func (li *lightInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return li.fan.add(h), nil
}

// AddEventHandlerWithResyncPeriod is AddEventHandler: the resync is the informer's.
func (li *lightInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, _ time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return li.AddEventHandler(h)
}

// AddEventHandlerWithOptions is AddEventHandler: the resync is the informer's.
func (li *lightInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, _ toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return li.AddEventHandler(h)
}

// RemoveEventHandler removes a handler AddEventHandler joined.
func (li *lightInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	if fh, ok := reg.(*fanHandler); ok && fh.fan == li.fan && li.fan.remove(fh) {
		return nil
	}
	return errors.New("cache: handler not registered")
}

func (li *lightInformer) GetStore() toolscache.Store               { return li.indexer }
func (li *lightInformer) GetIndexer() toolscache.Indexer           { return li.indexer }
func (li *lightInformer) GetController() toolscache.Controller     { return li.ctrl }
func (li *lightInformer) HasSynced() bool                          { return li.ctrl.HasSynced() }
func (li *lightInformer) LastSyncResourceVersion() string          { return li.ctrl.LastSyncResourceVersion() }
func (li *lightInformer) IsStopped() bool                          { return li.stopped.Load() }
func (li *lightInformer) AddIndexers(ix toolscache.Indexers) error { return li.indexer.AddIndexers(ix) }

// Run runs the informer until stopCh is closed.
func (li *lightInformer) Run(stopCh <-chan struct{}) {
	li.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext runs the informer until ctx ends; an informer runs once (a second call
// returns at once, as client-go's does).
func (li *lightInformer) RunWithContext(ctx context.Context) {
	if !li.ran.CompareAndSwap(false, true) {
		return
	}
	defer li.stopped.Store(true)
	li.ctrl.RunWithContext(ctx)
}

func (li *lightInformer) SetWatchErrorHandler(toolscache.WatchErrorHandler) error {
	return errLightInformer
}

func (li *lightInformer) SetWatchErrorHandlerWithContext(toolscache.WatchErrorHandlerWithContext) error {
	return errLightInformer
}

func (li *lightInformer) SetTransform(toolscache.TransformFunc) error { return errLightInformer }

// fanout is an informer's handlers: the informer calls it, it calls each of them.
type fanout struct {
	mu       sync.RWMutex
	handlers []*fanHandler
	synced   func() bool // the informer's HasSynced
}

var _ toolscache.ResourceEventHandler = (*fanout)(nil)

// fanHandler is a handler joined to a fanout; it is its own registration.
type fanHandler struct {
	toolscache.ResourceEventHandler
	fan *fanout
}

// HasSynced implements toolscache.ResourceEventHandlerRegistration: the informer's.
func (h *fanHandler) HasSynced() bool { return h.fan.synced() }

// OnAdd, OnUpdate and OnDelete hand a change to every handler.
func (f *fanout) OnAdd(obj any, initial bool) {
	for _, h := range f.current() {
		h.OnAdd(obj, initial)
	}
}

func (f *fanout) OnUpdate(old, obj any) {
	for _, h := range f.current() {
		h.OnUpdate(old, obj)
	}
}

func (f *fanout) OnDelete(obj any) {
	for _, h := range f.current() {
		h.OnDelete(obj)
	}
}

func (f *fanout) current() []*fanHandler {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.handlers
}

func (f *fanout) add(h toolscache.ResourceEventHandler) *fanHandler {
	f.mu.Lock()
	defer f.mu.Unlock()
	fh := &fanHandler{ResourceEventHandler: h, fan: f}
	f.handlers = append(slices.Clip(f.handlers), fh) // a copy: current's callers keep theirs
	return fh
}

func (f *fanout) remove(fh *fanHandler) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(f.handlers, fh)
	if i < 0 {
		return false
	}
	f.handlers = slices.Delete(slices.Clone(f.handlers), i, i+1)
	return true
}
