package server

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/watch"
)

// Ingress configures what runs next to the gRPC trigger and the HTTP receiver: the
// built-in ReplicaSet watcher, the direct EventBus subscription and the periodic orphan
// sweep. The zero value runs none of them. With several clusters the watcher and the
// sweeper run for every registered cluster (also those added later, e.g. by an Argo CD
// cluster Secret) and stop when a cluster is removed.
type Ingress struct {
	// Watch runs the built-in ReplicaSet watcher, in every cluster.
	Watch bool
	// WatchResync is the watcher's full resync period (watch.Options.Resync).
	WatchResync time.Duration
	// WatchWorkers is how many ReplicaSets each watcher handles at once
	// (watch.Options.Workers; zero means its default).
	WatchWorkers int
	// EventBus, when set, subscribes to the Argo Events EventBus; its events go through
	// the dispatcher like every other way in.
	EventBus *eventbus.SubscriberOptions
	// GC configures the orphan sweepers, one per cluster: trigger events with
	// `operation: gc` use them; with a positive Interval they also sweep periodically and
	// after attaches. Nil means defaults and no periodic sweep.
	GC *GCOptions
}

// GCOptions configure the periodic orphan sweep of `serve`.
type GCOptions struct {
	// Interval between periodic sweeps; zero means no periodic sweep.
	Interval time.Duration
	// Options are the planner's MinAge and Keep.
	Options gc.Options
	// LeaseNamespace, when set, elects one sweeper among the replicas, per cluster, on a
	// Lease in this namespace of the default cluster (see LeaseName).
	LeaseNamespace string
	// DryRun logs what each sweep would delete and deletes nothing.
	DryRun bool
	// ServerDryRun sends each sweep's deletes and repairs with dryRun=All (ignored with DryRun).
	ServerDryRun bool
}

// LeaseName is the name of the Lease the sweepers of cluster name elect their leader on:
// gc.DefaultLeaseName for the default cluster (as with one cluster), else
// gc.DefaultLeaseName + "-" + name when that is a valid object name (RFC 1123
// subdomain, the rule for Lease names), else + "-h" + a 64-bit FNV-1a hash of name in
// hex (names of that very form are hashed too, so two clusters never share a Lease).
func LeaseName(name string, isDefault bool) string {
	if isDefault {
		return gc.DefaultLeaseName
	}
	n := gc.DefaultLeaseName + "-" + name
	if len(validation.IsDNS1123Subdomain(n)) == 0 && !hashLike.MatchString(name) {
		return n
	}
	// Hashed names end in "-h" + 16 hex digits; a name of that form is hashed too, so that
	// no cluster name can take another cluster's Lease.
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return fmt.Sprintf("%s-h%016x", gc.DefaultLeaseName, h.Sum64())
}

// hashLike matches cluster names of the form LeaseName gives hashed names.
var hashLike = regexp.MustCompile(`^h[0-9a-f]{16}$`)

// validate checks the ingress options and fills GC's default.
func (in *Ingress) validate() error {
	if in.GC == nil {
		in.GC = &GCOptions{Options: gc.DefaultOptions()}
	}
	if in.GC.Interval < 0 {
		return core.Invalidf("gc-interval", "must not be negative, got %s", in.GC.Interval)
	}
	return in.GC.Options.Validate()
}

// gcParts are what every cluster's sweeper shares: the metrics and the client of the
// leader-election Leases (in the default cluster; nil without leader election).
type gcParts struct {
	metrics     *gc.Metrics
	leaseClient kubernetes.Interface
}

func (s *Server) gcParts(metrics *dispatch.Metrics) (gcParts, error) {
	var p gcParts
	var err error
	if p.metrics, err = gc.NewMetrics(metrics.Registry); err != nil {
		return p, fmt.Errorf("gc metrics: %w", err)
	}
	if s.opts.Ingress.GC.LeaseNamespace != "" {
		def, err := s.reg.Cluster("")
		if err != nil {
			return p, err
		}
		p.leaseClient = def.Clients.Kube
	}
	return p, nil
}

// subscriber builds the EventBus subscription of Ingress.EventBus (nil without one).
func (s *Server) subscriber(metrics *dispatch.Metrics) (*eventbus.Subscriber, error) {
	if s.opts.Ingress.EventBus == nil {
		return nil, nil
	}
	o := *s.opts.Ingress.EventBus
	if o.Logger == nil {
		o.Logger = s.log
	}
	if o.Registerer == nil {
		o.Registerer = metrics.Registry
	}
	if o.Options == nil {
		o.Options = &s.spec
	}
	return eventbus.NewSubscriber(o, s.d)
}

// perCluster is the registry's per-cluster work: once the cluster's caches are in sync,
// its watcher (with Ingress.Watch) and its sweeper (periodic with a GC interval; always
// there for `operation: gc`), until the cluster is removed or serve stops.
func (s *Server) perCluster(ctx context.Context, c *cluster.Cluster) error {
	log := s.log.With("cluster", c.Name())
	for _, ch := range c.Caches {
		if err := ch.WaitForSync(ctx); err != nil {
			return nil // removed or shutting down before sync
		}
	}
	// Build every part before starting any, so an error leaves nothing running.
	watchers, err := s.watchers(c, log)
	if err != nil {
		return err
	}
	sw, stopRecorder, err := s.sweeper(c, log)
	if err != nil {
		return err
	}
	defer stopRecorder()
	s.sweepers.set(ctx, c.Name(), sw)
	defer s.sweepers.remove(c.Name(), sw)
	g, gctx := errgroup.WithContext(ctx)
	for _, w := range watchers {
		g.Go(func() error { return w.Run(gctx) })
	}
	g.Go(func() error { releaseAfterReplay(gctx, log, watchers); return nil })
	if s.opts.Ingress.GC.Interval > 0 {
		g.Go(func() error { return sw.Run(gctx) })
	}
	// The sweeper serves `operation: gc` until the cluster is removed or serve stops.
	g.Go(func() error { <-gctx.Done(); return nil })
	return g.Wait()
}

// watchers builds a watcher per cache of c. Every way in gets the revision side (a
// revision that appears after its ReplicaSet, or loses its owners, is attached from
// its own change); --watch adds ReplicaSets.
func (s *Server) watchers(c *cluster.Cluster, log *slog.Logger) ([]*watch.Watcher, error) {
	in := s.opts.Ingress
	var watchers []*watch.Watcher
	for _, ch := range c.Caches {
		var rs toolscache.SharedIndexInformer
		if in.Watch {
			rs = ch.ReplicaSetInformer()
		}
		w, err := watch.New(rs, s.d, watch.Options{Cluster: c.Name(), Options: &s.spec, Revisions: ch.RevisionInformers(),
			Listed: ch.Listed,
			Resync: in.WatchResync, Workers: in.WatchWorkers, StopGrace: s.opts.ShutdownTimeout, Logger: log})
		if err != nil {
			return nil, err
		}
		watchers = append(watchers, w)
	}
	return watchers, nil
}

// sweepers holds the orphan sweeper of every cluster that has one running, for
// `operation: gc` events and the sweep after an attach (dispatch.Sweeps).
type sweepers struct {
	reg *cluster.Registry
	// periodic: sweeps run periodically, so an attach that wrote schedules one.
	periodic bool
	mu       sync.Mutex
	by       map[string]liveSweeper
}

// liveSweeper is a cluster's sweeper and its registration's context, which ends when
// the cluster is removed (or re-registered) or serve stops.
type liveSweeper struct {
	sw   *gc.Sweeper
	life context.Context
}

func (s *sweepers) set(life context.Context, name string, sw *gc.Sweeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.by[name] = liveSweeper{sw: sw, life: life}
}

// remove forgets sw unless another sweeper has replaced it (a re-registered cluster).
func (s *sweepers) remove(name string, sw *gc.Sweeper) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by[name].sw == sw {
		delete(s.by, name)
	}
}

// get returns the sweeper of cluster name ("" is the default) with its registration's
// context. Errors: an unknown cluster (core.ErrInvalid), a cluster whose caches have
// not synced yet (core.ErrUnavailable).
func (s *sweepers) get(name string) (liveSweeper, error) {
	c, err := s.reg.Cluster(name)
	if err != nil {
		return liveSweeper{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ls, ok := s.by[c.Name()]
	if !ok {
		return liveSweeper{}, fmt.Errorf("cluster %q: %w: its orphan sweeper has not started (caches not synced)", c.Name(), core.ErrUnavailable)
	}
	return ls, nil
}

// AfterAttach implements dispatch.Sweeps: with periodic sweeps, schedule a sweep of the
// namespace.
func (s *sweepers) AfterAttach(name, ns string) {
	if !s.periodic {
		return
	}
	if ls, err := s.get(name); err == nil {
		ls.sw.Trigger(ns)
	}
}

// Sweep implements dispatch.Sweeps: `operation: gc` in the event's cluster. The sweep
// ends with the event or with the cluster's registration, whichever ends first: a
// cluster removed (or re-registered with new credentials) mid-sweep gets no further
// delete or repair from it.
func (s *sweepers) Sweep(ctx context.Context, name, ns string, dryRun bool) (any, string, error) {
	ls, err := s.get(name)
	if err != nil {
		return nil, "", err
	}
	ctx, stop := within(ls.life, ctx)
	defer stop()
	run := ls.sw.SweepNamespace
	if dryRun {
		run = ls.sw.SweepNamespaceDryRun
	}
	rep, err := run(ctx, ns)
	if rep == nil {
		return nil, "", err
	}
	return rep, fmt.Sprintf("gc %s: %s", ns, rep.Summary()), err
}

// within returns a context that ends when life ends (at once: a child of life) or when
// ctx ends, with ctx's deadline; stop releases it. No value of ctx is carried.
func within(life, ctx context.Context) (context.Context, func()) {
	out, cancel := context.WithCancelCause(life)
	if d, ok := ctx.Deadline(); ok {
		var cancelDeadline context.CancelFunc
		out, cancelDeadline = context.WithDeadline(out, d)
		prev := cancel
		cancel = func(err error) { cancelDeadline(); prev(err) }
	}
	release := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	return out, func() { release(); cancel(nil) }
}

// sweeper builds cluster c's orphan sweeper and returns it with the function that stops
// its Event broadcaster. The Lease (with leader election) lives in the default cluster,
// named LeaseName.
func (s *Server) sweeper(c *cluster.Cluster, log *slog.Logger) (*gc.Sweeper, func(), error) {
	o, metrics, leaseClient := *s.opts.Ingress.GC, s.gc.metrics, s.gc.leaseClient
	recorder, stopRecorder := kube.NewBroadcastRecorder(c.Clients.Kube)
	cl := c.Clients
	stores := make(gc.Stores, len(c.Caches))
	for i, ch := range c.Caches {
		stores[i] = ch
	}
	live := gc.LiveSource{Client: cl.Kube, Dynamic: cl.Dynamic, Metadata: cl.Metadata, IncludeSecrets: s.opts.AllowSecrets}
	cfg := gc.Config{Cluster: c.Name(), Client: cl.Kube, Metadata: cl.Metadata, Attacher: c.Attacher, AllowSecrets: s.opts.AllowSecrets,
		Source:   gc.CachedSource{Store: stores, Live: live},
		Recorder: recorder, Metrics: metrics, Logger: log, Options: o.Options, Interval: o.Interval, DryRun: o.DryRun,
		ServerDryRun: o.ServerDryRun, Clock: cl.Clock.Now}
	switch {
	case len(c.Spec.Namespaces) > 0:
		cfg.Namespaces = c.Spec.Namespaces
	case s.opts.Namespace != "":
		// A namespaced install (Role, not ClusterRole) may only list its own namespace.
		cfg.Namespaces = []string{s.opts.Namespace}
	}
	if o.LeaseNamespace != "" {
		cfg.LeaderElection = &gc.LeaderElection{Client: leaseClient, Namespace: o.LeaseNamespace,
			Name: LeaseName(c.Name(), c.Name() == s.reg.DefaultName())}
	}
	sw, err := gc.NewSweeper(cfg)
	if err != nil {
		stopRecorder()
		return nil, nil, err
	}
	return sw, stopRecorder, nil
}
