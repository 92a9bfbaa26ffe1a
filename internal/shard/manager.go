package shard

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// Manager holds this replica's share of the fleet's shards. Create it with New, run it
// with Run; Owns and Owner are safe for concurrent use.
type Manager struct {
	o        Options
	held     held
	released releases
	start    time.Time

	mu       sync.Mutex
	leases   map[string]observed // Lease name -> what this replica saw of it
	electors map[int]*elector
	taken    map[int]time.Time // shard -> when this replica last took it
	runCtx   context.Context
	kick     chan struct{}
	// watching: the fleet's Leases are listed (Run); Settled is false until then.
	watching atomic.Bool

	// instance tells this process from any other given the same identity, started its
	// start time (docs/design.md, "Fleet": one identity, two processes).
	instance string
	started  time.Time
	// beat renews the member Lease while this instance claims its identity; nil while it
	// waits for another instance's Lease to go. Reconcile's alone (Run's once it ends).
	beat *heartbeat
	// waiting: another instance renews this identity's member Lease, so this one holds
	// nothing; mismatch: this replica's shard count is not the fleet's, likewise.
	waiting, mismatch atomic.Bool
	// fleetShards is the fleet's shard count as last seen (its oldest member's), with which
	// Owner maps a cluster to its shard.
	fleetShards atomic.Int64

	plan planned // the assignment of the last member set; reconcile's alone
}

// planned is the Assignment of one member set, kept until the set changes.
type planned struct {
	key string
	a   Assignment
}

// observed is a Lease as seen here, with the local time its holder or renew time last
// changed: freshness is judged on this replica's clock alone, as client-go's leader
// election does, so clock skew between replicas does not matter.
type observed struct {
	holder, address, shards string
	renew                   time.Time
	duration                time.Duration
	changed, first          time.Time
	// of a member Lease: the instance renewing it, its shard count and start time (0 and
	// zero when it says none: a replica of a version before them)
	instance string
	count    int
	started  time.Time
}

func (l observed) fresh(now time.Time) bool {
	return l.holder != "" && now.Before(l.changed.Add(l.duration))
}

type elector struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates o and returns a Manager.
func New(o Options) (*Manager, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	o.Logger = o.Logger.With("component", "fleet", "identity", o.Identity)
	now := time.Now()
	m := &Manager{o: o, held: held{by: map[int]bool{}}, leases: map[string]observed{}, electors: map[int]*elector{}, taken: map[int]time.Time{},
		kick: make(chan struct{}, 1), instance: instanceToken(now), started: now}
	m.fleetShards.Store(int64(o.Shards))
	return m, nil
}

// Identity returns this replica's identity; Shards the number of shards.
func (m *Manager) Identity() string { return m.o.Identity }
func (m *Manager) Shards() int      { return m.o.Shards }

// Owns reports whether this replica holds the shard of cluster name (pin: its Argo CD
// Secret's `shard` field, -1 for none).
func (m *Manager) Owns(name string, pin int) bool { return m.held.has(Of(name, pin, m.o.Shards)) }

// Owner returns the identity and the forwarding address of the replica holding the
// shard of cluster name, "" when no replica holds it (fresh) at the moment. The shard is
// the cluster's under the fleet's shard count, which a replica of another count reads too.
func (m *Manager) Owner(name string, pin int) (identity, address string) {
	count := int(m.fleetShards.Load())
	i := Of(name, pin, count)
	if count == m.o.Shards && m.held.has(i) {
		return m.o.Identity, m.o.Address
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	l, ok := m.leases[m.o.shardLease(i)]
	if !ok || !l.fresh(now) {
		return "", ""
	}
	mem, ok := m.leases[m.o.Fleet+"-member-"+l.holder]
	if !ok || !mem.fresh(now) {
		return "", ""
	}
	return l.holder, mem.address
}

// Run watches the fleet's Leases, heartbeats this replica's member Lease and holds its
// share of the shards until ctx ends; then it stops its clusters, releases its shards
// and deletes its member Lease, so that the others take over at once. While another
// instance renews the member Lease of its identity, or its shard count is not the
// fleet's, it holds nothing (docs/design.md, "Fleet").
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	f := informers.NewSharedInformerFactoryWithOptions(m.o.Client, 0, informers.WithNamespace(m.o.Namespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = LabelFleet + "=" + m.o.Fleet }))
	inf := f.Coordination().V1().Leases().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: m.observe, UpdateFunc: func(_, obj any) { m.observe(obj) }, DeleteFunc: m.forget,
	}); err != nil {
		return fmt.Errorf("shard: lease handler: %w", err)
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil
	}
	m.mu.Lock()
	m.start = time.Now() // the member set settles no sooner than two retry periods from here
	m.mu.Unlock()
	m.watching.Store(true)
	m.o.Logger.Info("fleet member", "shards", m.o.Shards, "address", m.o.Address, "namespace", m.o.Namespace,
		"instance", m.instance)
	m.loop(ctx)
	m.stopAll()
	if m.stopBeat() {
		m.leave()
	}
	return nil
}

// loop reconciles every RetryPeriod and whenever a Lease changes.
func (m *Manager) loop(ctx context.Context) {
	t := time.NewTicker(m.o.RetryPeriod)
	defer t.Stop()
	for {
		m.reconcile()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

// annotate labels the member Lease and says where this replica is reached and which
// shards it holds (read by the others' Owner and the fleet metrics), which instance
// renews it, its shard count and when it started.
func (m *Manager) annotate(l *coordinationv1.Lease) error {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelFleet], l.Labels[LabelRole] = m.o.Fleet, roleMember
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	shards := m.held.list()
	sort.Ints(shards)
	parts := make([]string, len(shards))
	for k, i := range shards {
		parts[k] = strconv.Itoa(i)
	}
	l.Annotations[AnnotationAddress], l.Annotations[AnnotationShards] = m.o.Address, strings.Join(parts, ",")
	l.Annotations[AnnotationInstance] = m.instance
	l.Annotations[AnnotationShardCount] = strconv.Itoa(m.o.Shards)
	l.Annotations[AnnotationStarted] = m.started.UTC().Format(time.RFC3339Nano)
	return nil
}

func (m *Manager) observe(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	now := time.Now()
	n := observed{address: l.Annotations[AnnotationAddress], shards: l.Annotations[AnnotationShards], changed: now, first: now,
		instance: l.Annotations[AnnotationInstance]}
	n.count, n.started = memberOf(l.Annotations)
	if l.Spec.HolderIdentity != nil {
		n.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		n.renew = l.Spec.RenewTime.Time
	}
	if l.Spec.LeaseDurationSeconds != nil {
		n.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	m.mu.Lock()
	if old, ok := m.leases[l.Name]; ok {
		if old.holder == n.holder && old.renew.Equal(n.renew) {
			n.changed = old.changed
		}
		// A Lease that had expired and is renewed starts a new life (a member back
		// after a crash): the release gate counts its time seen from then
		// (docs/design.md, "Fleet").
		if old.fresh(now) || !n.fresh(now) {
			n.first = old.first
		}
	}
	m.leases[l.Name] = n
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) forget(obj any) {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok {
		m.mu.Lock()
		delete(m.leases, l.Name)
		m.mu.Unlock()
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

// view is this replica's reading of the live members at one instant.
type view struct {
	// ids are the members taking part: those of the fleet's shard count, or saying none
	// (a version before the count was said), sorted; first is when each was first seen.
	ids   []string
	first map[string]time.Time
	// live counts every live member, whatever its shard count (this replica included).
	live int
	// count is the fleet's shard count: its oldest live member's (by start time, then
	// identity), among those that say theirs; oldest is that member.
	count  int
	oldest string
}

// view returns the live members (this replica always among them, with its own shard
// count and start time) and the fleet's shard count.
func (m *Manager) view(now time.Time) view {
	type member struct {
		first, started time.Time
		count          int
	}
	m.mu.Lock()
	all := map[string]member{m.o.Identity: {first: m.start}}
	prefix := m.o.Fleet + "-member-"
	for name, l := range m.leases {
		if id, ok := strings.CutPrefix(name, prefix); ok && l.fresh(now) && l.holder == id {
			all[id] = member{first: l.first, started: l.started, count: l.count}
		}
	}
	m.mu.Unlock()
	self := all[m.o.Identity]
	self.started, self.count = m.started, m.o.Shards // its own, whoever renews its Lease
	all[m.o.Identity] = self
	v := view{first: map[string]time.Time{}, live: len(all), count: m.o.Shards, oldest: m.o.Identity}
	for id, mem := range all {
		if mem.count > 0 && !mem.started.IsZero() && older(mem.started, id, all[v.oldest].started, v.oldest) {
			v.count, v.oldest = mem.count, id
		}
	}
	for id, mem := range all {
		if mem.count == 0 || mem.count == v.count {
			v.ids, v.first[id] = append(v.ids, id), mem.first
		}
	}
	slices.Sort(v.ids)
	return v
}

func (m *Manager) shardLease(i int) (observed, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.leases[m.o.shardLease(i)]
	return l, ok
}

// reconcile decides, shard by shard, whether this replica contends, keeps or releases.
// It contends as preferred or standby replica, and a holder releases a shard to its
// preferred replica, only once the member set has settled: every live member seen for
// two retry periods, and this replica watching for as long. A member joining moves shards
// between the others too (Assign balances the loads), none moves for a member that is gone
// again at once, and a replica that has not yet seen the others (all started at once)
// takes no shard that it is preferred for only in its own partial view. A Lease without a
// fresh holder for the grace period is anyone's (docs/design.md, "Fleet").
//
// A replica holds nothing while another instance renews the member Lease of its identity
// (claim) or while its shard count is not the fleet's (takesPart).
func (m *Manager) reconcile() {
	now := time.Now()
	v := m.view(now)
	m.fleetShards.Store(int64(v.count))
	if !m.claim(now) || !m.takesPart(v) {
		return
	}
	ids := v.ids
	a := m.assignment(ids)
	settled := now.Sub(newest(v.first)) >= 2*m.o.RetryPeriod
	for i := 0; i < m.o.Shards; i++ {
		top := a.Top(i)
		l, seen := m.shardLease(i)
		expired := m.expiredFor(l, seen, now) >= m.o.Grace
		live := seen && slices.Contains(ids, l.holder)
		e := m.elector(i)
		switch {
		case m.held.has(i) && top[0] != m.o.Identity && settled && m.renewedSinceTaken(top[0], i):
			m.release(i, top[0])
		case e == nil && (expired || settled && m.wants(i, top, l, live, false, now)):
			m.contend(i)
		case e != nil && !expired && !m.held.has(i) && !m.wants(i, top, l, live, true, now):
			m.stopElector(i)
		}
	}
}

// renewedSinceTaken reports whether member id's Lease was seen renewed after this replica
// took shard i: a holder releases a shard to its preferred replica only then. A standby
// takes the shard of a preferred replica that died when its shard Lease expires, which
// may be a moment before its member Lease does: until then the dead replica still counts
// as a member, and releasing to it would move the shard twice (docs/design.md, "Fleet").
func (m *Manager) renewedSinceTaken(id string, i int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.leases[m.o.Fleet+"-member-"+id]
	return ok && mem.changed.After(m.taken[i])
}

// wants reports whether this replica, once the member set has settled, contends for shard
// i (top: its preferred replica and standby; live: its Lease is seen held by a live
// member; running: its elector runs already): the preferred replica does, unless it
// released the shard to another preferred one less than a Lease duration ago
// (shard.releases). The standby starts contending only for a Lease a live member holds
// (fresh) and keeps at it while the Lease names a holder, so that its elector, which has
// been watching the Lease, takes the shard the moment the holder's Lease expires; it
// leaves a Lease never held, released, or held by a replica no longer a member to the
// preferred replica's first try, with no second move (anyone takes it after the grace).
func (m *Manager) wants(i int, top []string, l observed, live, running bool, now time.Time) bool {
	switch {
	case m.released.heldOff(i, top[0], now, m.o.LeaseDuration):
		return false
	case top[0] == m.o.Identity:
		return true
	case len(top) > 1 && top[1] == m.o.Identity:
		return live && l.fresh(now) || running && l.holder != ""
	}
	return false
}

// elector returns shard i's running elector, nil if there is none (or it has returned).
func (m *Manager) elector(i int) *elector {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.electors[i]
	if e != nil && isDone(e.done) {
		delete(m.electors, i)
		return nil
	}
	return e
}

// newest returns the latest of the times first seen (ids always holds this replica).
func newest(first map[string]time.Time) time.Time {
	return slices.MaxFunc(slices.Collect(maps.Values(first)), time.Time.Compare)
}

// assignment returns Assign(ids, shards), computed again only when ids change.
func (m *Manager) assignment(ids []string) Assignment {
	key := strings.Join(ids, "\x00")
	if m.plan.a.Preferred == nil || m.plan.key != key {
		m.plan = planned{key: key, a: Assign(ids, m.o.Shards)}
	}
	return m.plan.a
}

// expiredFor is how long shard Lease l has been without a fresh holder (since this
// replica started, for a Lease it never saw).
func (m *Manager) expiredFor(l observed, seen bool, now time.Time) time.Duration {
	switch {
	case !seen:
		return now.Sub(m.start)
	case l.fresh(now):
		return 0
	case l.holder == "":
		return now.Sub(l.changed)
	}
	return now.Sub(l.changed.Add(l.duration))
}

func isDone(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Settled reports whether this replica's first hand-over has settled: it has watched
// the fleet's Leases, every live member has been seen for two retry periods (the time a
// holder waits before releasing a shard to its preferred replica), and it holds exactly
// the shards it is the preferred replica of. The registry's start-up readiness gate
// waits for it (docs/design.md, "Readiness at start-up"); it may turn false again later
// (a member joins or leaves), which the gate no longer asks. While another instance
// renews the member Lease of its identity it is not settled, so the gate holds its
// readiness until the start-up deadline at most; a replica whose shard count is not the
// fleet's is settled once it holds nothing (docs/design.md, "Fleet").
func (m *Manager) Settled() bool {
	if !m.watching.Load() || m.waiting.Load() {
		return false
	}
	now := time.Now()
	v := m.view(now)
	if v.count != m.o.Shards {
		return len(m.held.list()) == 0
	}
	for _, id := range v.ids {
		if now.Sub(v.first[id]) < 2*m.o.RetryPeriod {
			return false
		}
	}
	a := Assign(v.ids, m.o.Shards) // computed here: m.plan is reconcile's alone
	for i := 0; i < m.o.Shards; i++ {
		if m.held.has(i) != (a.Preferred[i] == m.o.Identity) {
			return false
		}
	}
	return true
}

// Notify implements cluster.Ownership: fn is called whenever the shards held here
// change; call it before Run.
func (m *Manager) Notify(fn func(ctx context.Context)) {
	prev := m.o.OnChange
	m.o.OnChange = func(ctx context.Context) { prev(ctx); fn(ctx) }
}

// SetClusters sets the source of the registered clusters for the fleet metrics; call
// it before Run.
func (m *Manager) SetClusters(fn func() map[string]int) { m.o.Clusters = fn }

// Summary is one line for /readyz: this replica, the live members, the shards it holds,
// and why it holds none while it waits for its identity or its shard count is not the
// fleet's.
func (m *Manager) Summary() string {
	v := m.view(time.Now())
	switch {
	case m.waiting.Load():
		return fmt.Sprintf("fleet %s: holds no shard: another instance renews member Lease %s (identity in use); "+
			"this one takes over once that Lease expires or is deleted", m.o.Identity, m.o.memberLease())
	case v.count != m.o.Shards:
		return fmt.Sprintf("fleet %s: %d members, holds no shard: its shard count %d is not the fleet's %d (member %s's, the oldest); "+
			"it takes part once the members of %d are gone", m.o.Identity, v.live, m.o.Shards, v.count, v.oldest, v.count)
	}
	held := m.held.list()
	sort.Ints(held)
	return fmt.Sprintf("fleet %s: %d members, holds shards %v of %d", m.o.Identity, v.live, held, m.o.Shards)
}
