package watch

// Queued is the number of keys waiting in the watcher's queue (both lanes, including
// replayed keys held back by the replay bound).
func (w *Watcher) Queued() int {
	w.lanes.mu.Lock()
	defer w.lanes.mu.Unlock()
	return w.lanes.urgent.len() + w.lanes.replay.len()
}

// Urgent is the number of keys waiting in the urgent lane.
func (w *Watcher) Urgent() int {
	w.lanes.mu.Lock()
	defer w.lanes.mu.Unlock()
	return w.lanes.urgent.len()
}
