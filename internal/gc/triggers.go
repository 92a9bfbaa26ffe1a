package gc

import (
	"context"
	"sync"
	"time"
)

// triggers are the sweeps Trigger asks for. They cost no goroutine while none is due: a
// namespace's sweep is a timer, whose goroutine lives only while it waits for its turn
// and sweeps (a replica serves many clusters, most idle: docs/design.md, "Per-cluster
// cost"). Triggered sweeps run one at a time; the triggers of a namespace whose sweep is
// due coalesce into it, and a trigger during its sweep asks for another one.
type triggers struct {
	mu sync.Mutex
	// ctx is Run's while it runs: due sweeps run on it. Before Run (and after) triggers
	// wait in pending.
	ctx     context.Context
	pending map[string]bool
	timers  map[string]*time.Timer // the namespaces whose sweep is due, by namespace
	active  sync.WaitGroup         // one per timer set and not stopped; added to under mu only while ctx is set
	turn    sync.Mutex             // held by the triggered sweep under way
}

func newTriggers() triggers {
	return triggers{pending: map[string]bool{}, timers: map[string]*time.Timer{}}
}

// Trigger asks for a sweep of namespace ns soon ("after an attach in that namespace",
// trigger spec operation: gc). It never blocks; the sweep runs Config.TriggerDelay
// later, and the requests for that namespace meanwhile coalesce into it. Triggered sweeps
// run on every replica (deletes are protected by preconditions), not only on the leader,
// while Run runs.
func (s *Sweeper) Trigger(ns string) {
	t := &s.trig
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx == nil {
		t.pending[ns] = true
		return
	}
	s.dueLocked(ns)
}

// dueLocked sets the timer of ns's sweep unless one is set.
func (s *Sweeper) dueLocked(ns string) {
	t := &s.trig
	if _, ok := t.timers[ns]; ok {
		return // coalesced into the sweep that is due
	}
	ctx := t.ctx
	t.active.Add(1)
	t.timers[ns] = time.AfterFunc(s.cfg.TriggerDelay, func() {
		defer t.active.Done()
		t.turn.Lock() // one triggered sweep at a time
		defer t.turn.Unlock()
		t.mu.Lock()
		delete(t.timers, ns) // a trigger from now on asks for another sweep
		t.mu.Unlock()
		if ctx.Err() == nil {
			_, _ = s.SweepNamespace(ctx, ns) // logged there
		}
	})
}

// startTriggers lets triggered sweeps run on ctx (Run's); the triggers that came before
// are due from now.
func (s *Sweeper) startTriggers(ctx context.Context) {
	t := &s.trig
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ctx = ctx
	for ns := range t.pending {
		s.dueLocked(ns)
	}
	t.pending = map[string]bool{}
}

// endTriggers, once Run's context has ended, drops the sweeps not started and waits for
// the one under way (it stops with that context).
func (s *Sweeper) endTriggers() {
	t := &s.trig
	t.mu.Lock()
	t.ctx = nil
	for ns, tm := range t.timers {
		if tm.Stop() {
			t.active.Done() // its function will not run
		}
		delete(t.timers, ns)
	}
	t.mu.Unlock()
	t.active.Wait()
}
