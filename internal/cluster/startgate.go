package cluster

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStartupDeadline is how long the start-up readiness gate waits at most
// (Options.StartupDeadline): past it the service is ready with whatever has synced,
// as it was before the gate (docs/design.md, "Readiness at start-up").
const DefaultStartupDeadline = 30 * time.Second

// startupCluster is one cluster known at start, as the gate sees it.
type startupCluster struct {
	name string
	// here: this replica is to run it (always without a fleet; with one, it owns it).
	here bool
	// synced: its caches have listed; down: its last health probe failed.
	synced, down bool
}

// startupView is what the gate decides on.
type startupView struct {
	now, deadline time.Time
	// sources: the clusters known at start are known (the Argo CD Secrets' first list
	// admitted) and, with a fleet, this replica's first hand-over has settled;
	// pending says what is awaited otherwise.
	sources bool
	pending string
	// clusters are the clusters known at start that are still registered.
	clusters []startupCluster
}

// startupDecision is the gate's answer: open, or what it still waits for.
type startupDecision struct {
	open bool
	// byDeadline: opened because the deadline passed with clusters still starting.
	byDeadline bool
	// pending is what it waits for besides clusters ("" when only clusters, or none);
	// starting the clusters here that neither synced nor are down (sorted); of how many
	// known at start and run here.
	pending  string
	starting []string
	of       int
}

// decideStartup is the gate's rule: start-up is over once the sources are in and every
// cluster known at start that runs here is in sync or down (probe failed), or once the
// deadline passed. A cluster owned by another replica is not waited for; one not
// probed yet and not synced is.
func decideStartup(v startupView) startupDecision {
	var d startupDecision
	for _, c := range v.clusters {
		if !c.here {
			continue
		}
		d.of++
		if !c.synced && !c.down {
			d.starting = append(d.starting, c.name)
		}
	}
	sort.Strings(d.starting)
	if !v.sources {
		d.pending = v.pending
	}
	done := v.sources && len(d.starting) == 0
	if !done && !v.now.Before(v.deadline) {
		d.open, d.byDeadline = true, true
		return d
	}
	d.open = done
	return d
}

// summary is the decision in one line for /readyz (no cluster names: those are in
// detail, behind the token).
func (d startupDecision) summary(left time.Duration) string {
	left = left.Round(time.Second)
	if d.pending != "" {
		return fmt.Sprintf("starting: waiting for %s (start-up deadline in %s)", d.pending, left)
	}
	return fmt.Sprintf("starting: %d of %d clusters known at start not in sync yet (start-up deadline in %s)", len(d.starting), d.of, left)
}

// detail names the clusters still starting, for /readyz with the token.
func (d startupDecision) detail() string {
	if d.open || len(d.starting) == 0 {
		return ""
	}
	names := d.starting
	if len(names) > 20 {
		names = append(names[:20:20], fmt.Sprintf("… %d more", len(d.starting)-20))
	}
	return "still starting (caches not in sync): " + strings.Join(names, ", ")
}

// startupGate holds the service not ready until start-up is over (decideStartup), then
// stays open for the life of the registry: a cluster added or going down later never
// makes the whole replica unready again.
type startupGate struct {
	deadline time.Duration
	mu       sync.Mutex
	start    time.Time
	// known are the clusters known at start, nil until they are (Run without Argo CD
	// Secrets, else their first admission).
	known map[string]bool
	open  atomic.Bool
}

// begin starts the deadline's clock (Run).
func (g *startupGate) begin(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.start = now
}

// setKnown records the clusters known at start, once.
func (g *startupGate) setKnown(names []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known != nil {
		return
	}
	g.known = make(map[string]bool, len(names))
	for _, n := range names {
		g.known[n] = true
	}
}

// isKnown reports whether name was known at start, and whether that set is taken yet.
func (g *startupGate) isKnown(name string) (known, taken bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.known[name], g.known != nil
}

// deadlineAt is when the gate opens at the latest; false before begin.
func (g *startupGate) deadlineAt() (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.start.Add(g.deadline), !g.start.IsZero()
}

// settler is an Ownership that can say when this replica's first hand-over has
// settled (package shard); without it ownership is settled from the start.
type settler interface{ Settled() bool }

// startup returns the gate's decision now, and opens the gate for good (logged once)
// when start-up is over.
func (r *Registry) startup() startupDecision {
	g := r.gate
	if g.open.Load() {
		return startupDecision{open: true}
	}
	deadline, begun := g.deadlineAt()
	if !begun {
		return startupDecision{pending: "the registry to run"}
	}
	v := startupView{now: time.Now(), deadline: deadline, sources: true}
	_, taken := g.isKnown("")
	if s, ok := r.opts.Ownership.(settler); ok && !s.Settled() {
		v.sources, v.pending = false, "this replica's first shard hand-over to settle"
	}
	if !taken {
		v.sources, v.pending = false, "the first list of Argo CD cluster Secrets"
	}
	r.mu.RLock()
	for name, m := range r.members {
		if known, _ := g.isKnown(name); known {
			v.clusters = append(v.clusters, m.startupState(r.opts.Ownership))
		}
	}
	r.mu.RUnlock()
	d := decideStartup(v)
	if d.open && g.open.CompareAndSwap(false, true) {
		took := time.Since(deadline.Add(-g.deadline)).Round(time.Millisecond)
		if d.byDeadline {
			r.log.Warn("start-up readiness: deadline passed, ready with clusters still starting", "took", took,
				"deadline", g.deadline, "pending", d.pending, "starting", d.starting, "of", d.of)
		} else {
			r.log.Info("start-up readiness: every cluster known at start is in sync or down", "took", took, "clusters", d.of)
		}
	}
	return d
}

// startupState is m as the start-up gate sees it.
func (m *member) startupState(own Ownership) startupCluster {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	return startupCluster{name: m.c.Spec.Name, here: own == nil || own.Owns(m.c.Spec.Name, m.pin), synced: m.synced(),
		down: m.probed && !m.reachable}
}
