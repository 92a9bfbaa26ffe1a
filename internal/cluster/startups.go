package cluster

import (
	"context"
	"sync"
	"time"
)

// DefaultConcurrentStartups bounds how many clusters list their caches at once
// (RuntimeOptions.Startups): a replica taking on hundreds of clusters (its start, a
// rebalance) lists them a few at a time, so each list gets the CPU and its own
// cluster's requests are not queued behind every other's (docs/design.md, "Per-cluster
// cost"). A cluster's caches stay running once listed; only the start-up is bounded.
const DefaultConcurrentStartups = 8

// Startups is a bound on concurrent cluster start-ups, shared by every runtime of a
// replica. The zero value is not usable; make it with NewStartups.
type Startups struct{ slots chan struct{} }

// NewStartups returns a bound of n start-ups at once (n <= 0: DefaultConcurrentStartups).
func NewStartups(n int) *Startups {
	if n <= 0 {
		n = DefaultConcurrentStartups
	}
	return &Startups{slots: make(chan struct{}, n)}
}

// acquire waits for a start-up slot and returns its release (safe to call more than
// once, from any goroutine; called by itself after StartupHold), or false when ctx ends
// first. A nil *Startups bounds nothing.
func (s *Startups) acquire(ctx context.Context) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	select {
	case s.slots <- struct{}{}: // a free slot is taken even if ctx has ended
	default:
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return nil, false
		}
	}
	var once sync.Once
	free := func() { once.Do(func() { <-s.slots }) }
	t := time.AfterFunc(StartupHold, free)
	return func() { t.Stop(); free() }, true
}

// StartupHold is the longest a cluster holds its start-up slot: one that does not list
// within it (unreachable, hung, huge) lets the next cluster start, and goes on listing.
const StartupHold = 30 * time.Second
