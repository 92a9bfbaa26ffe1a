package watch

// Queued is the number of keys waiting in the watcher's queue (both lanes).
func (w *Watcher) Queued() int { return w.queue.Len() }

// Urgent is the number of keys waiting in the urgent lane.
func (w *Watcher) Urgent() int {
	w.lanes.mu.Lock()
	defer w.lanes.mu.Unlock()
	return len(w.lanes.urgent)
}
