package cache

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// DefaultReplicaSetWait is how long AwaitReplicaSet waits for the ReplicaSet informer to
// deliver a ReplicaSet an event announced (Options.ReplicaSetWait).
const DefaultReplicaSetWait = time.Second

// maxWaiting bounds the AwaitReplicaSet calls waiting at once in the process (every
// cache, cluster and namespace together, as the dispatcher's in-flight slots are): a
// quarter of the default 64 slots, which every way in shares, the watcher and the
// revision side too. A call beyond it does not wait (ok false at once: the core reads
// live, as without the wait), so names that never arrive, forged or deleted before the
// cache saw them, hold at most that many slots for the bound. A genuine wait lasts the
// informer's delivery, milliseconds: real events rarely meet the cap.
const maxWaiting = 16

// waitingCalls counts the AwaitReplicaSet calls waiting, process-wide (maxWaiting).
var waitingCalls atomic.Int32

// errWaitBound is the cause of an AwaitReplicaSet context that reached the cache's bound.
var errWaitBound = errors.New("cache: the ReplicaSet did not arrive within the wait")

// arrivals wakes the AwaitReplicaSet calls waiting for a ReplicaSet key: the ReplicaSet
// informer's event handler calls arrived for every add and update, waiters watch a key.
type arrivals struct {
	waiting atomic.Int32 // keys watched: the handler does nothing while it is zero
	mu      sync.Mutex
	keys    map[string]*arrival
}

// arrival is one key's wake-up: ch is closed when an object of that key is stored.
type arrival struct {
	ch chan struct{}
	n  int // watchers of ch
}

// watch returns a channel closed at the next arrival of key, and stop, which the caller
// calls once it no longer waits on the channel.
func (a *arrivals) watch(key string) (<-chan struct{}, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys == nil {
		a.keys = map[string]*arrival{}
	}
	w := a.keys[key]
	if w == nil {
		w = &arrival{ch: make(chan struct{})}
		a.keys[key] = w
		a.waiting.Add(1)
	}
	w.n++
	return w.ch, func() { a.unwatch(key, w) }
}

func (a *arrivals) unwatch(key string, w *arrival) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.n--; w.n == 0 && a.keys[key] == w {
		delete(a.keys, key)
		a.waiting.Add(-1)
	}
}

// arrived wakes the watchers of obj's key (the informer has stored obj).
func (a *arrivals) arrived(obj any) {
	if a.waiting.Load() == 0 {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.keys[key]; w != nil {
		close(w.ch)
		delete(a.keys, key)
		a.waiting.Add(-1)
	}
}

// handler is the ReplicaSet informer's event handler that feeds a. The informer calls it
// after storing the object, so a woken waiter finds it in the store.
func (a *arrivals) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.arrived(obj) },
		UpdateFunc: func(_, obj any) { a.arrived(obj) },
	}
}

// AwaitReplicaSet implements core.ReplicaSetAwaiter: it returns the cached ReplicaSet
// namespace/name (with UID uid, unless uid is empty) as soon as the ReplicaSet informer
// has stored it, waiting at most Options.ReplicaSetWait and as long as ctx lasts. It
// returns ok false at once when the namespace is outside the cache's, the ReplicaSet
// informer has not synced (its initial list is still running: nothing to wait for),
// waiting is off, or maxWaiting calls wait already. Each wait is counted (Waits).
func (c *Cache) AwaitReplicaSet(ctx context.Context, namespace, name string, uid types.UID) (*appsv1.ReplicaSet, bool) {
	if c.opts.ReplicaSetWait < 0 || !c.inScope(namespace) || !c.rsInf.HasSynced() {
		return nil, false
	}
	if waitingCalls.Add(1) > maxWaiting {
		waitingCalls.Add(-1)
		c.waits.add("full")
		return nil, false
	}
	defer waitingCalls.Add(-1)
	bound := c.opts.ReplicaSetWait
	if bound == 0 {
		bound = DefaultReplicaSetWait
	}
	ctx, cancel := context.WithTimeoutCause(ctx, bound, errWaitBound)
	defer cancel()
	key := namespace + "/" + name
	for {
		arrived, stop := c.arrivals.watch(key) // before looking: an arrival in between wakes it
		rs, ok := cached(c.rsInf, namespace, name).(*appsv1.ReplicaSet)
		if ok && (uid == "" || rs.UID == uid) {
			stop()
			c.waits.add("hit")
			return rs, true
		}
		select {
		case <-arrived:
			stop() // an older namesake, say: look again
		case <-ctx.Done():
			stop()
			if errors.Is(context.Cause(ctx), errWaitBound) {
				c.waits.add("timeout")
			} else {
				c.waits.add("cancelled")
			}
			return nil, false
		}
	}
}

// Waits returns how many AwaitReplicaSet waits ended with outcome: "hit" (the informer
// delivered the ReplicaSet), "timeout" (it did not within Options.ReplicaSetWait),
// "cancelled" (the caller's context ended first) or "full" (no wait: maxWaiting other
// calls were waiting).
func (c *Cache) Waits(outcome string) int64 { return c.waits.get(outcome) }

// counters are named counts, for tests and metrics.
type counters struct{ m sync.Map } // name -> *atomic.Int64

func (c *counters) add(name string) {
	v, _ := c.m.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (c *counters) get(name string) int64 {
	if v, ok := c.m.Load(name); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}
