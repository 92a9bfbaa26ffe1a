package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// lazyListers starts the Deployment and Rollout informers (the workloads that list
// revisions by name, besides ReplicaSets) when the cluster first needs them: with the
// user informers (an attach or a sweep: Users and Workloads then wait for them), with a
// read of a Deployment or a Rollout, or when the ReplicaSet informer holds a ReplicaSet
// a Deployment or a Rollout controls. An idle cluster without them watches only its
// ReplicaSets and config objects (docs/design.md, "Per-cluster cost"). Until they have
// synced, Deployment and Rollout reads go live and Users reads live, as before any sync.
//
// The revision side's Listed reads their indexes. A listing they hold once they have
// synced may be of a config object that appeared before: every function OnListersSynced
// was given (the revision side's Replay) is called when each of them has synced after a
// start, so that such an object is looked at again then, as a workload that arrived after
// its config object is by the ReplicaSet side or the resync (docs/design.md, "The
// revision side").
type lazyListers struct {
	mu sync.Mutex // serialises starts and the Rollout API's look
	// ctx is Run's while Run is running (nil before and once it is ending): the informers
	// run on it, and wg waits for them.
	ctx        context.Context
	wg         sync.WaitGroup
	wanted     atomic.Bool // a need was seen: start them (the Rollout one once served)
	depStarted bool
	served     atomic.Bool // the Argo Rollouts API was found
	onSynced   []func(listed []string)
	// poll is the look for the Argo Rollouts API (runListers' timer); stopRollouts stops
	// the Rollout informer (dropGoneRollouts).
	poll         *time.Timer
	stopRollouts context.CancelFunc
}

// OnListersSynced adds f to the functions called (on a goroutine of their own) each time
// the Deployment or the Rollout informer has synced after its start, with the
// core.UsesKey of every config object the synced informer's workloads list by name
// (ListedIndex).
func (c *Cache) OnListersSynced(f func(listed []string)) {
	c.listers.mu.Lock()
	defer c.listers.mu.Unlock()
	c.listers.onSynced = append(c.listers.onSynced, f)
}

// runListers lets the listers start for the life of ctx (Run's), starting them now if
// they were wanted before, and looks for the Argo Rollouts API now, before the
// ReplicaSet informer starts (so that a need seen in its initial list finds the API
// known), then on a timer's goroutine every Options.RolloutPoll until it is found or Run
// ends. The timer is returned to be stopped.
func (c *Cache) runListers(ctx context.Context) *time.Timer {
	c.listers.mu.Lock()
	c.listers.ctx = ctx
	c.startListersLocked()
	c.listers.mu.Unlock()
	c.lookForRollouts()
	c.listers.mu.Lock() // the timer is set before its first look reads it
	defer c.listers.mu.Unlock()
	var t *time.Timer
	t = time.AfterFunc(c.opts.RolloutPoll, func() {
		c.lookForRollouts()
		c.dropGoneRollouts()
		c.listers.mu.Lock()
		defer c.listers.mu.Unlock()
		if c.listers.ctx != nil && (!c.listers.served.Load() || !c.rolloutsSynced()) {
			t.Reset(c.opts.RolloutPoll)
		}
	})
	if c.listers.served.Load() && c.rolloutsSynced() {
		t.Stop() // found at once
	}
	c.listers.poll = t
	return t
}

// endListers lets no lister start any more and waits for those running.
func (c *Cache) endListers() {
	c.listers.mu.Lock()
	c.listers.ctx = nil // no start after this
	c.listers.mu.Unlock()
	c.listers.wg.Wait()
}

// wantListers starts the Deployment informer and, once the Argo Rollouts API is known
// served, the Rollout informer, unless a need was seen already.
func (c *Cache) wantListers() {
	if c.listers.wanted.Swap(true) {
		return
	}
	c.listers.mu.Lock()
	defer c.listers.mu.Unlock()
	c.startListersLocked()
}

// startListersLocked starts the listers wanted and not yet running; listers.mu is held.
func (c *Cache) startListersLocked() {
	ctx := c.listers.ctx
	if !c.listers.wanted.Load() || ctx == nil || ctx.Err() != nil {
		return
	}
	if !c.listers.depStarted {
		c.listers.depStarted = true
		c.runLister(ctx, c.depInf, "Deployments")
	}
	if c.listers.served.Load() && c.rollouts.Load() == nil {
		inf := c.newRolloutInformer()
		if err := inf.AddIndexers(toolscache.Indexers{UsesIndex: usesIndexFunc, WorkloadRefIndex: workloadRefIndexFunc, ListedIndex: listedIndexFunc}); err != nil {
			c.log.Warn("Rollout informer indexes", "err", err)
		}
		c.rollouts.Store(&inf)
		rctx, stop := context.WithCancel(ctx)
		c.listers.stopRollouts = stop
		c.runLister(rctx, inf, "Rollouts")
		if c.listers.poll != nil {
			c.listers.poll.Reset(c.opts.RolloutPoll) // until it has synced: dropGoneRollouts
		}
	}
}

// dropGoneRollouts stops the Rollout informer when it has not synced and the Argo
// Rollouts API is confirmed absent: the CRD was removed after it was found (an idle
// cluster starts the informer only once needed), and the informer's list would answer
// NotFound for ever, holding every sweep and sending every Users read live. The cluster
// is then served as one without the API until a later look finds it again
// (docs/design.md, "Per-cluster cost").
func (c *Cache) dropGoneRollouts() {
	inf := c.rollouts.Load()
	if inf == nil || (*inf).HasSynced() {
		return
	}
	if served, known := c.rolloutAPIServed(); served || !known {
		return
	}
	c.listers.mu.Lock()
	defer c.listers.mu.Unlock()
	if c.rollouts.Load() != inf || (*inf).HasSynced() {
		return
	}
	c.listers.stopRollouts()
	c.rollouts.Store(nil)
	c.listers.served.Store(false)
	c.log.Info("Argo Rollouts API gone before its informer synced: not caching Rollouts")
}

// rolloutAPIServed looks for the Argo Rollouts API with one discovery GET: whether it
// is served, and whether the look got an answer (served or absent).
func (c *Cache) rolloutAPIServed() (served, known bool) {
	rl, err := c.clients.Kube.Discovery().ServerResourcesForGroupVersion(core.RolloutGroup + "/" + core.RolloutVersion)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			c.log.Debug("looking for the Argo Rollouts API", "err", err)
			return false, false
		}
		return false, true
	}
	for _, r := range rl.APIResources {
		if r.Name == core.RolloutResource {
			return true, true
		}
	}
	return false, true
}

// runLister runs inf on ctx and, on a goroutine that lives until it has synced, calls the
// OnListersSynced functions then; listers.mu is held.
func (c *Cache) runLister(ctx context.Context, inf toolscache.SharedIndexInformer, what string) {
	c.listers.wg.Go(func() { inf.RunWithContext(ctx) })
	c.listers.wg.Go(func() {
		if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return
		}
		c.listers.mu.Lock()
		fns := c.listers.onSynced
		c.listers.mu.Unlock()
		listed := inf.GetIndexer().ListIndexFuncValues(ListedIndex)
		for _, f := range fns {
			f(listed)
		}
	})
	c.log.Debug("caching " + what)
}

// noteController is the ReplicaSet informer's handler that wants the listers once a
// ReplicaSet a Deployment or a Rollout controls is stored.
func (c *Cache) noteController(obj any) {
	if c.listers.wanted.Load() {
		return
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil && (ref.Kind == "Deployment" || ref.Kind == core.RolloutKind) {
		c.wantListers()
	}
}

// lookForRollouts looks for the Argo Rollouts API (one discovery GET, not under
// listers.mu) unless it was found already, and starts the Rollout informer if it is
// served and wanted. It reports whether the look got an answer (served or absent).
func (c *Cache) lookForRollouts() bool {
	if c.listers.served.Load() {
		return true
	}
	c.listers.mu.Lock()
	running := c.listers.ctx != nil && c.listers.ctx.Err() == nil
	c.listers.mu.Unlock()
	if !running {
		return false // not running: nothing may be started
	}
	served, known := c.rolloutAPIServed()
	if !served {
		return known
	}
	c.listers.mu.Lock()
	defer c.listers.mu.Unlock()
	if !c.listers.served.Swap(true) {
		c.log.Info("Argo Rollouts API found: caching Rollouts once needed")
	}
	c.startListersLocked()
	return true
}

// rolloutsSynced reports whether the Rollout informer, if started, has synced (HasSynced).
func (c *Cache) rolloutsSynced() bool {
	inf := c.rollouts.Load()
	return inf == nil || (*inf).HasSynced()
}

// listersReady reports whether the Deployment informer has synced and the Rollout one
// too, unless the Argo Rollouts API is not known served (Users, Workloads).
func (c *Cache) listersReady() bool {
	if !c.depInf.HasSynced() {
		return false
	}
	if !c.listers.served.Load() {
		return true
	}
	inf := c.rollouts.Load()
	return inf != nil && (*inf).HasSynced()
}
