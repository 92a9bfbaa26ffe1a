package cache

import (
	"errors"
	"slices"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
)

// ReplicaSetInformer returns the shared ReplicaSet informer the cache reads from, so a
// watcher can add its event handler to the same informer (one watch, one copy in
// memory). Handlers receive the stored records (record.go): they read them through
// metav1.Object, or Decode one into its *appsv1.ReplicaSet; they must not mutate them.
//
// Its AddEventHandler joins the cache's own handler registration instead of making one:
// client-go runs two goroutines for every registration, for the life of the informer,
// and the ReplicaSet way in's handler and the cache's arrivals (AwaitReplicaSet) then
// share one (docs/design.md, "Per-cluster cost"). A handler added so gets every change
// from then on, in the informer's order; unlike client-go's late registration, it is not
// handed the objects stored already (its registration's HasSynced is the cache's): read
// them from the store, as the watcher's replay does.
func (c *Cache) ReplicaSetInformer() toolscache.SharedIndexInformer {
	return &sharedRegistration{SharedIndexInformer: c.rsInf, fan: &c.rsFan}
}

// fanout is one handler registration of an informer handed on to several handlers.
type fanout struct {
	mu       sync.RWMutex
	handlers []*fanHandler
	reg      toolscache.ResourceEventHandlerRegistration // the one registration
}

// fanHandler is a handler joined to a fanout; it is its own registration.
type fanHandler struct {
	toolscache.ResourceEventHandler
	fan *fanout
}

// HasSynced implements toolscache.ResourceEventHandlerRegistration: the fanout's.
func (h *fanHandler) HasSynced() bool { return h.fan.reg.HasSynced() }

// register makes the fanout's registration on inf with its first handler, own.
func (f *fanout) register(inf toolscache.SharedIndexInformer, own toolscache.ResourceEventHandler) error {
	f.handlers = []*fanHandler{{ResourceEventHandler: own, fan: f}}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			for _, h := range f.current() {
				h.OnAdd(obj, initial)
			}
		},
		UpdateFunc: func(old, obj any) {
			for _, h := range f.current() {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range f.current() {
				h.OnDelete(obj)
			}
		},
	})
	f.reg = reg
	return err
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

// sharedRegistration is an informer whose AddEventHandler joins fan (ReplicaSetInformer).
type sharedRegistration struct {
	toolscache.SharedIndexInformer
	fan *fanout
}

// AddEventHandler joins h to the fanout.
func (s *sharedRegistration) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.fan.add(h), nil
}

// RemoveEventHandler removes a handler AddEventHandler joined; other registrations are
// the informer's.
func (s *sharedRegistration) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	if fh, ok := reg.(*fanHandler); ok {
		if fh.fan != s.fan || !s.fan.remove(fh) {
			return errors.New("cache: handler not registered")
		}
		return nil
	}
	return s.SharedIndexInformer.RemoveEventHandler(reg)
}
