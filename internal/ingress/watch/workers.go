package watch

import (
	"context"
	"sync"
)

// runWorkers hands the queue's keys to at most Options.Workers goroutines at once until
// the queue is shut down and empty, then waits for the keys in progress. A worker
// goroutine lives only while it holds a key: an idle watcher costs this one goroutine,
// not Workers of them, which matters for a replica serving many clusters, each with
// its watchers (docs/design.md, "Per-cluster cost"). The workqueue still never hands a
// key to two workers and owns retries and shutdown.
func (w *Watcher) runWorkers(ctx, work context.Context) {
	slots := make(chan struct{}, w.opts.Workers)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		slots <- struct{}{} // a free worker slot before the next key is taken
		key, quit := w.queue.Get()
		if quit {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			w.processNext(ctx, work, key)
		}()
	}
}
