package watch

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// timerDelaying is the watcher's delaying queue (the retries' backoff): client-go's runs
// a goroutine for the life of the queue, this one a timer per key that waits, so an idle
// watcher costs no goroutine for it (docs/design.md, "Per-cluster cost"). As client-go's,
// a key waits once: a second AddAfter keeps the earlier time. ShutDown stops the timers.
type timerDelaying struct {
	workqueue.TypedInterface[string]
	mu      sync.Mutex
	waiting map[string]delayed
}

type delayed struct {
	t  *time.Timer
	at time.Time
}

func newTimerDelaying(q workqueue.TypedInterface[string]) *timerDelaying {
	return &timerDelaying{TypedInterface: q, waiting: map[string]delayed{}}
}

// AddAfter adds key once d has passed (at once when d is not positive).
func (q *timerDelaying) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key) // dropped once shut down
		return
	}
	at := time.Now().Add(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ShuttingDown() { // under mu: a ShutDown after this stops the timer set below
		return
	}
	if w, ok := q.waiting[key]; ok {
		if !at.Before(w.at) || !w.t.Stop() {
			return // it waits for an earlier time already (or is being added now)
		}
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		q.mu.Lock()
		if w, ok := q.waiting[key]; ok && w.t == t {
			delete(q.waiting, key)
		}
		q.mu.Unlock()
		q.Add(key)
	})
	q.waiting[key] = delayed{t: t, at: at}
}

// ShutDown shuts the queue down and stops the keys that wait.
func (q *timerDelaying) ShutDown() {
	q.TypedInterface.ShutDown()
	q.stopAll()
}

// ShutDownWithDrain is ShutDown, draining the queue first.
func (q *timerDelaying) ShutDownWithDrain() {
	q.stopAll()
	q.TypedInterface.ShutDownWithDrain()
}

func (q *timerDelaying) stopAll() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for key, w := range q.waiting {
		w.t.Stop()
		delete(q.waiting, key)
	}
}

var _ workqueue.TypedDelayingInterface[string] = (*timerDelaying)(nil)
