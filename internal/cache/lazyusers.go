package cache

import (
	"context"
	"slices"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
)

// lazyUsers starts the user informers (ControllerRevisions, StatefulSets, DaemonSets,
// Jobs, CronJobs, Pods) with the first read that needs them: a Users answer (an attach)
// or a sweep's Workloads. An idle cluster, with no event and no revision to sweep, then
// watches only its ReplicaSets and config objects (the Deployment and Rollout informers
// start on demand too: lazyListers): six watches fewer (docs/design.md, "Per-cluster
// cost"). Until they have synced, Users reads live (as before any sync: a partial answer
// could leave a user unprotected) and Workloads waits for them, so nothing is decided on
// a partial cache.
type lazyUsers struct {
	mu      sync.Mutex
	ctx     context.Context // Run's, nil before Run and once Run is ending
	started bool
	since   time.Time // when they started
	wg      sync.WaitGroup
}

// runUsers lets the user informers start on demand for the life of ctx (Run's), and
// returns the function that waits for them once ctx has ended.
func (c *Cache) runUsers(ctx context.Context) (wait func()) {
	c.users.mu.Lock()
	c.users.ctx = ctx
	c.users.mu.Unlock()
	return func() {
		c.users.mu.Lock()
		c.users.ctx = nil // no start after this
		c.users.mu.Unlock()
		c.users.wg.Wait()
	}
}

// startUsers starts the user informers unless they run already; false when the cache
// is not running.
func (c *Cache) startUsers() bool {
	c.wantListers() // Users and Workloads read Deployments and Rollouts too
	c.users.mu.Lock()
	defer c.users.mu.Unlock()
	if c.users.started {
		return true
	}
	ctx := c.users.ctx
	if ctx == nil || ctx.Err() != nil {
		return false
	}
	c.users.started, c.users.since = true, time.Now()
	for _, inf := range c.userInfs {
		c.users.wg.Go(func() { inf.RunWithContext(ctx) })
	}
	c.log.Debug("user informers started")
	return true
}

// usersReady starts the user informers if need be and reports whether they have synced.
func (c *Cache) usersReady() bool {
	if !c.startUsers() {
		return false
	}
	for _, inf := range c.userInfs {
		if !inf.HasSynced() {
			return false
		}
	}
	return c.listersReady()
}

// usersSyncWait bounds how long after their start awaitUsers waits for the user
// informers: a kind whose list never completes (a hung apiserver, RBAC that forbids it)
// must not hold a sweep, and its namespace's lock, for the life of the cluster.
var usersSyncWait = 30 * time.Second

// awaitUsers starts the user informers if need be and waits until they have synced, ctx
// ends or usersSyncWait has passed since they started (false).
func (c *Cache) awaitUsers(ctx context.Context) bool {
	if !c.startUsers() {
		return false
	}
	synced := make([]toolscache.InformerSynced, len(c.userInfs), len(c.userInfs)+1)
	for i, inf := range c.userInfs {
		synced[i] = inf.HasSynced
	}
	synced = append(synced, c.listersReady)
	c.users.mu.Lock()
	deadline := c.users.since.Add(usersSyncWait)
	c.users.mu.Unlock()
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	return toolscache.WaitForCacheSync(wctx.Done(), synced...)
}

// eager are the informers Run starts at once: all but the user informers and the
// Deployment one (lazyListers).
func (c *Cache) eager() []toolscache.SharedIndexInformer {
	var out []toolscache.SharedIndexInformer
	for _, inf := range append(slices.Clip(c.workloadInfs), c.cmInf, c.secInf) {
		if inf != nil && inf != c.depInf && !slices.Contains(c.userInfs, inf) {
			out = append(out, inf)
		}
	}
	return out
}
