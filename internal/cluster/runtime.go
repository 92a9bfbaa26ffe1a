package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/tools/record"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/watch"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// RuntimeOptions are what every cluster's Runtime is built from: one struct for the
// clients' use, the caches, the Attacher, the watchers and the sweeper of a cluster
// (docs/design.md, "Fleet").
type RuntimeOptions struct {
	// Namespace limits every cluster's caches to one namespace (clusters whose Spec
	// lists Namespaces use those instead); empty means all namespaces.
	Namespace string
	// AllowSecrets and BlockOwnerDeletion configure every cluster's Attacher (see
	// core.Config); AllowSecrets also caches Secret metadata and lets sweeps repair
	// Secrets.
	AllowSecrets, BlockOwnerDeletion bool
	// Namespaces restricts the namespaces events may act in, in every cluster (a
	// cluster whose Spec lists Namespaces is limited to those as well).
	Namespaces core.NamespacePolicy
	// RequestTimeout bounds every request to a cluster but watches
	// (DefaultRequestTimeout when zero; see withRequestDeadline).
	RequestTimeout time.Duration
	// ReplicaSetWait bounds how long an event that outran a cluster's ReplicaSet
	// informer waits for it (cache.Options.ReplicaSetWait).
	ReplicaSetWait time.Duration
	// Dispatcher receives the watchers' events. Nil: the runtime runs no watcher (its
	// caches, Attacher and sweeper only).
	Dispatcher watch.Dispatcher
	// Watch configures the watchers.
	Watch WatchOptions
	// GC configures the sweeper; nil: no sweeper.
	GC *SweepOptions
	// Startups bounds the clusters listing their caches at once, shared by every
	// runtime of the replica (the registry's default: NewStartups(0)); nil: no bound.
	Startups *Startups
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
}

// WatchOptions configure a runtime's watchers: one per cache, always with the revision
// side (safety rule 9), with the ReplicaSets when ReplicaSets is set (serve --watch).
type WatchOptions struct {
	ReplicaSets bool
	// Options are the effective options of every watched event; nil means the service's
	// defaults, which the dispatcher applies (dispatch.Request.Options).
	Options *core.Options
	// Resync, Workers and StopGrace are watch.Options'.
	Resync    time.Duration
	Workers   int
	StopGrace time.Duration
}

// SweepOptions configure a runtime's orphan sweeper: it serves `operation: gc` and, with
// a positive Interval, sweeps periodically and after attaches.
type SweepOptions struct {
	Interval     time.Duration
	Options      gc.Options
	DryRun       bool
	ServerDryRun bool
	// Metrics are shared by every cluster's sweeper (required).
	Metrics *gc.Metrics
	// Lease, when set, returns the Lease the periodic sweeps of cluster name are elected
	// on (serve --leader-elect without sharding); nil: no election.
	Lease func(name string) *gc.LeaderElection
}

// Runtime is everything of one cluster that runs on the replica serving it: its
// clients, informer caches, Attacher, one Event recorder, watchers and sweeper. It is
// built whole by NewRuntime and started and stopped as a unit by Run, so that the
// cluster can move between replicas.
type Runtime struct {
	Cluster
	// Recorder is the cluster's one Event recorder (Attacher and sweeper share it).
	Recorder record.EventRecorder
	// Sweeper is the cluster's orphan sweeper (nil without RuntimeOptions.GC).
	Sweeper *gc.Sweeper

	opts RuntimeOptions
	log  *slog.Logger
	// base is log without the cluster, for the Attacher and the sweeper, which add it
	// themselves (one key once on every line).
	base         *slog.Logger
	stopRecorder func()
	ran          chan struct{} // closed when Run begins
	life         context.Context
}

// NewRuntime builds the runtime of cluster sp from o. It contacts nothing; the Event
// recorder's broadcaster runs until Run returns (or Close, for a runtime never run).
func NewRuntime(sp Spec, o RuntimeOptions) (*Runtime, error) {
	if sp.Config == nil {
		return nil, fmt.Errorf("cluster %q: no client configuration", sp.Name)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	rt := &Runtime{Cluster: Cluster{Spec: sp}, opts: o, log: log.With("cluster", sp.Name), base: log, ran: make(chan struct{})}
	var err error
	if rt.Clients, err = kube.NewClients(withRequestDeadline(sp.Config, o.RequestTimeout)); err != nil {
		return nil, fmt.Errorf("cluster %q: %w", sp.Name, err)
	}
	if err := rt.buildCaches(); err != nil {
		return nil, err
	}
	rt.Recorder, rt.stopRecorder = kube.NewBroadcastRecorder(rt.Clients.Kube)
	if err := rt.buildCore(); err != nil {
		rt.stopRecorder()
		return nil, err
	}
	return rt, nil
}

// buildCaches builds one cache for all namespaces, or one per namespace of
// Spec.Namespaces, and the Reader over them.
func (rt *Runtime) buildCaches() error {
	sp, o := rt.Spec, rt.opts
	nss := sp.Namespaces
	if len(nss) == 0 {
		nss = []string{o.Namespace} // "" = all namespaces
	}
	byNS := map[string]core.Reader{}
	for _, ns := range nss {
		c, err := cache.New(rt.Clients, cache.Options{Namespace: ns, Secrets: o.AllowSecrets, ReplicaSetWait: o.ReplicaSetWait, Logger: rt.log})
		if err != nil {
			return fmt.Errorf("cluster %q: %w", sp.Name, err)
		}
		rt.Caches = append(rt.Caches, c)
		byNS[ns] = c
	}
	rt.Reader = rt.Caches[0]
	if len(rt.Caches) > 1 {
		cl := rt.Clients
		rt.Reader = nsReader{byNS: byNS, live: core.LiveReader{Client: cl.Kube, Dynamic: cl.Dynamic, Metadata: cl.Metadata}}
	}
	return nil
}

// buildCore builds the Attacher and the sweeper on the one recorder.
func (rt *Runtime) buildCore() error {
	o, name := rt.opts, rt.Spec.Name
	var err error
	rt.Attacher, err = core.NewAttacher(core.Config{Cluster: name, Client: rt.Clients.Kube, Metadata: rt.Clients.Metadata, Reader: rt.Reader, Recorder: rt.Recorder,
		AllowSecrets: o.AllowSecrets, BlockOwnerDeletion: o.BlockOwnerDeletion, Namespaces: namespacePolicy(o.Namespaces, rt.Spec),
		Logger: rt.base, Applications: &kube.Applications{Dynamic: rt.Clients.Dynamic}})
	if err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	if o.GC == nil {
		return nil
	}
	if rt.Sweeper, err = gc.NewSweeper(rt.sweeperConfig()); err != nil {
		return fmt.Errorf("cluster %q: %w", name, err)
	}
	return nil
}

func (rt *Runtime) sweeperConfig() gc.Config {
	o, g, cl := rt.opts, rt.opts.GC, rt.Clients
	stores := make(gc.Stores, len(rt.Caches))
	for i, ch := range rt.Caches {
		stores[i] = ch
	}
	live := gc.LiveSource{Client: cl.Kube, Dynamic: cl.Dynamic, Metadata: cl.Metadata, IncludeSecrets: o.AllowSecrets}
	cfg := gc.Config{Cluster: rt.Spec.Name, Client: cl.Kube, Metadata: cl.Metadata, Attacher: rt.Attacher, AllowSecrets: o.AllowSecrets,
		Source: gc.CachedSource{Store: stores, Live: live}, Recorder: rt.Recorder, Metrics: g.Metrics, Logger: rt.base,
		Options: g.Options, Interval: g.Interval, DryRun: g.DryRun, ServerDryRun: g.ServerDryRun, Clock: cl.Clock.Now}
	switch {
	case len(rt.Spec.Namespaces) > 0:
		cfg.Namespaces = rt.Spec.Namespaces
	case o.Namespace != "":
		// A namespaced install (Role, not ClusterRole) may only list its own namespace.
		cfg.Namespaces = []string{o.Namespace}
	}
	if g.Lease != nil {
		cfg.LeaderElection = g.Lease(rt.Spec.Name)
	}
	return cfg
}

// Life returns the context of Run, which ends when the runtime is stopped (the cluster
// removed, its ownership lost, serve stopping), or nil before Run.
func (rt *Runtime) Life() context.Context {
	select {
	case <-rt.ran:
		return rt.life
	default:
		return nil
	}
}

// Synced reports whether every cache of the runtime has listed.
func (rt *Runtime) Synced() bool {
	for _, c := range rt.Caches {
		if !c.HasSynced() {
			return false
		}
	}
	return true
}

// Close releases a runtime that was never run (its Event broadcaster).
func (rt *Runtime) Close() { rt.stopRecorder() }

// Run runs the caches and, once they are in sync, the watchers and the periodic
// sweeper, until ctx ends; then it waits for them and stops the Event recorder (its
// Events flushed). A part's failure is returned; the runtime stops with it.
func (rt *Runtime) Run(ctx context.Context) error {
	rt.life = ctx
	close(rt.ran)
	defer rt.stopRecorder()
	// A start-up slot (RuntimeOptions.Startups) is held until the caches have listed.
	release, ok := rt.opts.Startups.acquire(ctx)
	if !ok {
		return nil // stopped before its start-up
	}
	defer release()
	parts := make([]func(context.Context) error, 0, len(rt.Caches)+1)
	parts = append(parts, func(ctx context.Context) error {
		if err := rt.runParts(ctx, release); err != nil && ctx.Err() == nil {
			rt.log.Error("cluster work failed", "error", err)
			return err
		}
		return nil
	})
	for _, c := range rt.Caches {
		parts = append(parts, func(ctx context.Context) error {
			if err := c.Run(ctx); err != nil {
				rt.log.Error("cache stopped", "error", err)
			}
			return nil
		})
	}
	err := runAll(ctx, parts...)
	rt.log.Debug("cluster runtime stopped")
	return err
}

// runAll runs parts until ctx ends or one fails (which cancels the others), and returns
// the first error once all have returned. Its own goroutine runs the last part, the
// others get one each: an errgroup's Wait would cost one more goroutine for the life of
// every cluster (docs/design.md, "Per-cluster cost").
func runAll(ctx context.Context, parts ...func(context.Context) error) error {
	if len(parts) == 0 {
		return nil
	}
	g, gctx := errgroup.WithContext(ctx)
	ctx, cancel := context.WithCancel(gctx)
	defer cancel()
	for _, p := range parts[:len(parts)-1] {
		g.Go(func() error { return p(ctx) })
	}
	err := parts[len(parts)-1](ctx)
	if err != nil {
		cancel() // its failure stops the others, as a failure of one of theirs does
	}
	if gerr := g.Wait(); gerr != nil {
		return gerr
	}
	return err
}

// runParts waits for the caches, then runs the watchers and the sweeper until ctx ends.
func (rt *Runtime) runParts(ctx context.Context, started func()) error {
	for _, c := range rt.Caches {
		if err := c.WaitForSync(ctx); err != nil {
			return nil // stopping before sync
		}
	}
	started()
	watchers, err := rt.watchers()
	if err != nil {
		return err
	}
	// The parts that run until the stop come last (runAll runs the last on this goroutine).
	parts := make([]func(context.Context) error, 0, len(watchers)+2)
	if len(watchers) > 0 {
		parts = append(parts, func(ctx context.Context) error { releaseAfterReplay(ctx, rt.log, watchers); return nil })
	}
	for _, w := range watchers {
		parts = append(parts, w.Run)
	}
	if rt.Sweeper != nil && rt.opts.GC.Interval > 0 {
		parts = append(parts, rt.Sweeper.Run)
	}
	if len(parts) == 0 {
		<-ctx.Done() // the caches alone: nothing else runs until the stop
		return nil
	}
	return runAll(ctx, parts...)
}

// watchers builds the watchers of each cache: the revision side always, the ReplicaSet
// way in with WatchOptions.ReplicaSets. None without a Dispatcher.
func (rt *Runtime) watchers() ([]*watch.Watcher, error) {
	o := rt.opts
	if o.Dispatcher == nil {
		return nil, nil
	}
	var out []*watch.Watcher
	wo := watch.Options{Cluster: rt.Spec.Name, Options: o.Watch.Options, Resync: o.Watch.Resync, Workers: o.Watch.Workers,
		StopGrace: o.Watch.StopGrace, Logger: rt.log}
	for _, ch := range rt.Caches {
		w, err := watch.NewRevisions(watch.RevisionSources{Informers: ch.RevisionInformers(), Listed: ch.Listed,
			ReplicaSets: ch.ReplicaSetInformer(), Uses: cache.UsesOf}, o.Dispatcher, wo)
		if err != nil {
			return nil, fmt.Errorf("cluster %q: %w", rt.Spec.Name, err)
		}
		// Listed is complete once the Deployment and Rollout informers, started on
		// demand, have synced: the revision side looks again then at the config objects
		// their workloads list (cache.lazyListers).
		ch.OnListersSynced(w.LookAgain)
		out = append(out, w)
		if o.Watch.ReplicaSets {
			if w, err = watch.NewReplicaSets(ch.ReplicaSetInformer(), o.Dispatcher, wo); err != nil {
				return nil, fmt.Errorf("cluster %q: %w", rt.Spec.Name, err)
			}
			out = append(out, w)
		}
	}
	return out, nil
}

// releaseAfterReplay returns the start-up's garbage to the OS once every watcher of a
// cluster has handled its start-up replay: the initial lists' pages and the objects the
// replay decoded are free by then, but at the default GC target the heap had grown to
// about twice what the caches hold, and the runtime would return that memory only over
// minutes. One forced collection (debug.FreeOSMemory) right after start-up gives the
// resident memory the caches' size at once (docs/design.md, "Memory after start-up").
func releaseAfterReplay(ctx context.Context, log *slog.Logger, watchers []*watch.Watcher) {
	if len(watchers) == 0 {
		return
	}
	for _, w := range watchers {
		select {
		case <-w.Replayed():
		case <-ctx.Done():
			return
		}
	}
	start := time.Now()
	if !startupMemory.request() {
		log.Info("start-up done, its garbage returned to the OS with the next collection")
		return
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	log.Info("start-up done, its garbage returned to the OS", "heapBytes", ms.HeapAlloc,
		"releasedBytes", ms.HeapReleased, "took", time.Since(start).Round(time.Millisecond))
}

// startupMemory coalesces the forced collections of the clusters' start-ups: at most one
// every 5 s for the whole process.
var startupMemory = &memoryReturn{free: debug.FreeOSMemory, interval: 5 * time.Second}
