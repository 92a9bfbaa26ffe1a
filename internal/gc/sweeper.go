package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// LeaderElection configures client-go leader election on a coordination.k8s.io/v1
// Lease, so that only one of several replicas runs the periodic sweep.
type LeaderElection struct {
	// Client reads and writes the Lease (needs get, create, update on leases).
	Client kubernetes.Interface
	// Namespace and Name locate the Lease; Name defaults to DefaultLeaseName.
	Namespace string
	Name      string
	// Identity names this replica in the Lease; default hostname_random.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod default to 15s, 10s and 2s
	// (client-go's recommended values).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultLeaseName is the Lease the sweepers of one cluster elect their leader on.
const DefaultLeaseName = "configmap-attacher-gc"

// Config configures a Sweeper for one cluster.
type Config struct {
	// Cluster names the cluster in logs, metrics, events and reports.
	Cluster string
	// Client performs deletes (required).
	Client kubernetes.Interface
	// Metadata, when set, is the metadata client the live confirm before each delete
	// uses (Executor.Metadata).
	Metadata metadata.Interface
	// Source reads namespaces (required; LiveSource, or an informer-backed Source).
	Source Source
	// Attacher repairs referenced but unattached revisions; nil: report only.
	Attacher *core.Attacher
	// AllowSecrets lets repairs attach Secrets.
	AllowSecrets bool
	// Recorder receives an Event per deletion; Metrics count them.
	Recorder core.Recorder
	Metrics  *Metrics
	// Logger receives the sweep's logs; the Sweeper adds component=gc and
	// cluster=Cluster: pass a logger that does not name the cluster already.
	Logger *slog.Logger
	// Options are the planner's MinAge and Keep (Now is ignored: each sweep uses the clock).
	Options Options
	// Interval between periodic sweeps in Run; zero means DefaultInterval.
	Interval time.Duration
	// Namespaces limits sweeps to these namespaces; empty means every namespace holding
	// an opted-in revision (Source.Namespaces).
	Namespaces []string
	// Selector, when set, limits the plan to revisions whose labels match it. Planning
	// still sees every opted-in revision, so keep-N ranks whole families.
	Selector labels.Selector
	// DryRun makes every sweep report without writing (client-side: no request but reads).
	DryRun bool
	// ServerDryRun makes every sweep send its deletes with dryRun=All (see
	// Executor.ServerDryRun); ignored when DryRun is set.
	ServerDryRun bool
	// Parallel bounds the deletes of one sweep in flight at once (Executor.Parallel);
	// zero means DefaultParallel.
	Parallel int
	// LeaderElection, when set, makes Run's periodic sweeps leader-only.
	LeaderElection *LeaderElection
	// Clock returns the time for planning; nil means time.Now.
	Clock func() time.Time
	// TriggerDelay is how long after Trigger its sweep runs; the triggers of a namespace
	// meanwhile coalesce into one sweep. Zero means DefaultTriggerDelay.
	TriggerDelay time.Duration
	// MaxPlanAge bounds the age of the live plan a delete rests on: before a delete, a
	// plan older than this is taken again (its LISTs, once for every delete waiting on
	// it); zero means DefaultMaxPlanAge.
	MaxPlanAge time.Duration
}

// DefaultTriggerDelay is Config.TriggerDelay's default: a burst of attaches in a
// namespace costs one sweep of it. Revisions younger than MinAge (an hour by default)
// are never collected, so the delay holds back no deletion that matters.
const DefaultTriggerDelay = 30 * time.Second

// DefaultMaxPlanAge is Config.MaxPlanAge's default: at the default 50 QPS a namespace's
// LISTs cost a fifth of a second of the client's budget, so planning again every 5 s of
// deletes costs a few percent, a sweep shorter than that nothing, and a user created
// during a long sweep keeps its revision unless it appeared in the last 5 s
// (docs/design.md, "The sweep from the caches").
const DefaultMaxPlanAge = 5 * time.Second

// Sweeper runs orphan sweeps in one cluster. It is safe for concurrent use: sweeps of
// one namespace are serialised, and concurrent deletes by several replicas are safe
// thanks to the preconditions.
type Sweeper struct {
	cfg    Config
	log    *slog.Logger
	exec   *Executor
	leader atomic.Bool

	nsLocks sync.Map // namespace -> *sync.Mutex

	trig triggers // Trigger's sweeps (triggers.go)
}

// NewSweeper validates cfg and returns a Sweeper. Errors wrap core.ErrInvalid.
func NewSweeper(cfg Config) (*Sweeper, error) {
	if cfg.ServerDryRun && cfg.Recorder != nil {
		cfg.Recorder = nil // nothing is deleted: record nothing
	}
	if cfg.Client == nil && !cfg.DryRun {
		return nil, core.Invalidf("client", "gc: Config.Client is required")
	}
	if cfg.Source == nil {
		return nil, core.Invalidf("source", "gc: Config.Source is required")
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Parallel < 0 {
		return nil, core.Invalidf("gc-parallel", "must not be negative, got %d", cfg.Parallel)
	}
	if cfg.Interval < 0 {
		return nil, core.Invalidf("gc-interval", "must be positive, got %s", cfg.Interval)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.TriggerDelay < 0 {
		return nil, core.Invalidf("trigger-delay", "must not be negative, got %s", cfg.TriggerDelay)
	}
	if cfg.TriggerDelay == 0 {
		cfg.TriggerDelay = DefaultTriggerDelay
	}
	if cfg.MaxPlanAge < 0 {
		return nil, core.Invalidf("gc-max-plan-age", "must not be negative, got %s", cfg.MaxPlanAge)
	}
	if cfg.MaxPlanAge == 0 {
		cfg.MaxPlanAge = DefaultMaxPlanAge
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "gc", "cluster", cfg.Cluster) // once: the Executor gets this logger
	return &Sweeper{cfg: cfg, log: log, trig: newTriggers(),
		exec: &Executor{Cluster: cfg.Cluster, Client: cfg.Client, Metadata: cfg.Metadata, Attacher: cfg.Attacher, AllowSecrets: cfg.AllowSecrets,
			Recorder: cfg.Recorder, Metrics: cfg.Metrics, Logger: log, ServerDryRun: cfg.ServerDryRun, Parallel: cfg.Parallel}}, nil
}

// IsLeader reports whether this Sweeper currently holds the Lease (always true without
// leader election once Run has started).
func (s *Sweeper) IsLeader() bool { return s.leader.Load() }

// Plan reads namespace ns and returns its plan (filtered by Config.Selector) and the
// snapshot it came from. It writes nothing.
func (s *Sweeper) Plan(ctx context.Context, ns string) (*Plan, *Snapshot, error) {
	return s.planFrom(ctx, s.cfg.Source, ns)
}

func (s *Sweeper) planFrom(ctx context.Context, src Source, ns string) (*Plan, *Snapshot, error) {
	snap, err := src.Snapshot(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	o := s.cfg.Options
	o.Now = s.cfg.Clock()
	p, err := PlanNamespace(snap, o)
	if err != nil {
		return nil, nil, err
	}
	return Select(p, snap, s.cfg.Selector), snap, nil
}

// SweepNamespace plans namespace ns and carries the plan out (or, with Config.DryRun,
// reports it). A namespace the Attacher's namespace policy excludes is refused
// (core.ErrRefused) before anything is read. A real sweep that has something to do plans a second time and acts on
// Confirm(first, second) only. The Report lists every revision with its outcome; the
// error wraps core.ErrUnavailable when reading or some write failed transiently.
// Sweeps of one namespace are serialised.
func (s *Sweeper) SweepNamespace(ctx context.Context, ns string) (*Report, error) {
	return s.sweepLocked(ctx, ns, s.cfg.DryRun)
}

// SweepNamespaceDryRun is SweepNamespace without any write, whatever Config.DryRun
// says: for a trigger spec with operation: gc and dryRun: true. Its deletes are exactly
// what SweepNamespace would delete if nothing changed in between.
func (s *Sweeper) SweepNamespaceDryRun(ctx context.Context, ns string) (*Report, error) {
	return s.sweepLocked(ctx, ns, true)
}

func (s *Sweeper) sweepLocked(ctx context.Context, ns string, dryRun bool) (*Report, error) {
	if s.cfg.Attacher != nil {
		// The service's namespace policy (core.Config.Namespaces) holds for an on-demand
		// sweep too (trigger spec operation: gc), whoever asks for which namespace.
		if err := s.cfg.Attacher.CheckNamespace(ns); err != nil {
			return nil, fmt.Errorf("gc: %w", err)
		}
	}
	l, _ := s.nsLocks.LoadOrStore(ns, &sync.Mutex{})
	mu := l.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()

	start := time.Now()
	rep, err := s.sweep(ctx, ns, dryRun)
	if m := s.cfg.Metrics; m != nil {
		result := "ok"
		if err != nil {
			result = "error"
		}
		m.Sweeps.WithLabelValues(s.cfg.Cluster, result).Inc()
		m.Duration.WithLabelValues(s.cfg.Cluster).Observe(time.Since(start).Seconds())
	}
	if err != nil {
		s.log.Warn("sweep failed", "namespace", ns, "error", err)
	} else {
		s.log.Debug("swept", "namespace", ns, "revisions", len(rep.Results), "deleted", rep.Count(OutcomeDeleted),
			"changed", rep.Count(OutcomeChanged), "repaired", rep.Count(OutcomeRepaired), "dryRun", rep.DryRun)
	}
	return rep, err
}

func (s *Sweeper) sweep(ctx context.Context, ns string, dryRun bool) (*Report, error) {
	p, _, err := s.Plan(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("gc: planning namespace %s: %w", ns, err)
	}
	if dryRun || (p.Count(Delete) == 0 && p.Count(Repair) == 0) {
		return s.exec.Execute(ctx, p, dryRun)
	}
	src := s.cfg.Source
	if c, ok := src.(CachedSource); ok && p.Count(Delete) > 0 {
		// A cache may be behind by more than the watch delay (a broken watch keeps
		// HasSynced true): a delete rests on a live listing of the users, as before
		// the caches, so a Pod or workload the cache has not seen keeps its revision.
		src = c.Live
	}
	f := &freshness{at: time.Now(), maxAge: s.cfg.MaxPlanAge, replan: func(ctx context.Context) (*Plan, error) {
		p, _, err := s.planFrom(ctx, src, ns)
		return p, err
	}}
	second, err := f.replan(ctx)
	if err != nil {
		return nil, fmt.Errorf("gc: re-planning namespace %s: %w", ns, err)
	}
	return s.exec.execute(ctx, Confirm(p, second), dryRun, f)
}

// SweepAll sweeps Config.Namespaces, or every namespace holding an opted-in revision,
// one after the other. It returns the reports of the namespaces swept and the joined
// errors of those that failed (each wrapping its cause).
func (s *Sweeper) SweepAll(ctx context.Context) ([]*Report, error) {
	nss := s.cfg.Namespaces
	if len(nss) == 0 {
		var err error
		nss, err = s.cfg.Source.Namespaces(ctx)
		if err != nil {
			return nil, fmt.Errorf("gc: finding namespaces: %w", err)
		}
	}
	var reps []*Report
	var errs []error
	for _, ns := range nss {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		if s.cfg.Attacher != nil && s.cfg.Attacher.CheckNamespace(ns) != nil {
			continue // the service's namespace policy excludes it (core.Config.Namespaces)
		}
		rep, err := s.SweepNamespace(ctx, ns)
		if err != nil {
			errs = append(errs, err)
		}
		if rep != nil {
			reps = append(reps, rep)
		}
	}
	return reps, errors.Join(errs...)
}

// Run sweeps every Config.Interval (first sweep at once) until ctx ends, and runs
// triggered sweeps as they come. With Config.LeaderElection the periodic sweeps run
// only while this replica holds the Lease; it keeps campaigning after losing it. Run
// returns nil when ctx is cancelled; sweep failures are logged and retried next
// interval, never returned.
func (s *Sweeper) Run(ctx context.Context) error {
	s.startTriggers(ctx)
	defer s.endTriggers()
	if s.cfg.LeaderElection == nil {
		s.leader.Store(true)
		defer s.leader.Store(false)
		s.periodic(ctx)
		return nil
	}
	le, err := s.elector()
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		le.Run(ctx) // returns when leadership is lost or ctx ends
		s.leader.Store(false)
	}
	return nil
}

func (s *Sweeper) elector() (*leaderelection.LeaderElector, error) {
	c := *s.cfg.LeaderElection
	if c.Client == nil {
		c.Client = s.cfg.Client
	}
	if c.Client == nil || c.Namespace == "" {
		return nil, core.Invalidf("leader-election", "gc: LeaderElection needs a Client and a Namespace")
	}
	if c.Name == "" {
		c.Name = DefaultLeaseName
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "_" + string(uuid.NewUUID())
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, c.Namespace, c.Name,
		c.Client.CoreV1(), c.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: c.Identity})
	if err != nil {
		return nil, fmt.Errorf("gc: leader election lock: %w", err)
	}
	log := s.log.With("lease", c.Namespace+"/"+c.Name, "identity", c.Identity)
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: c.LeaseDuration, RenewDeadline: c.RenewDeadline, RetryPeriod: c.RetryPeriod,
		ReleaseOnCancel: true, Name: c.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading: periodic sweeps start")
				s.leader.Store(true)
				s.periodic(ctx)
			},
			OnStoppedLeading: func() {
				s.leader.Store(false)
				log.Info("not leading: periodic sweeps stop")
			},
		},
	})
}

func (s *Sweeper) periodic(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.SweepAll(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("periodic sweep had failures; retried next interval", "error", err, "interval", s.cfg.Interval)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Select returns p limited to the revisions of snap whose labels match sel (nil or
// empty sel: p itself).
func Select(p *Plan, snap *Snapshot, sel labels.Selector) *Plan {
	if sel == nil || sel.Empty() {
		return p
	}
	match := map[types.UID]bool{}
	for _, r := range snap.Revisions {
		if sel.Matches(labels.Set(r.Labels)) {
			match[r.UID] = true
		}
	}
	out := *p
	out.Items = nil
	for _, it := range p.Items {
		if match[it.UID] {
			out.Items = append(out.Items, it)
		}
	}
	return &out
}
