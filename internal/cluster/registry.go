// Package cluster is the multi-cluster registry: the set of clusters one service
// serves, each with its own Kubernetes clients, informer cache (package cache), core
// Attacher and health. Clusters come from kubeconfig contexts, from the cluster the
// service runs in, and from Argo CD's declarative cluster Secrets, which are watched so
// that an added, changed or removed Secret takes effect without a restart.
//
// A Registry implements dispatch.Clusters: an event names its
// cluster, the empty name is the default cluster, and an unknown name is a
// *core.FieldError for field "cluster" (core.ErrInvalid). One unreachable cluster never
// blocks the others: each cluster's caches and health probe run on their own, and an
// event for a cluster whose last probe failed is answered at once with
// core.ErrUnavailable (retry later).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Defaults of Options.
const (
	DefaultProbeInterval = 10 * time.Second
	DefaultProbeTimeout  = 5 * time.Second
	// DefaultArgoCDResync is how often Argo CD Secrets are re-examined (a Secret that
	// lost a name conflict is retried then).
	DefaultArgoCDResync = time.Minute
)

// Options configure a Registry.
type Options struct {
	// Clusters are the static clusters (the home cluster, kubeconfig contexts). At least
	// one is required; names must be unique.
	Clusters []Spec
	// Default names the cluster events without a cluster go to; empty means the first
	// of Clusters.
	Default string
	// ArgoCDNamespace, when set, registers the clusters of the Argo CD cluster Secrets
	// in this namespace of the default cluster, watched live.
	ArgoCDNamespace string
	// ArgoCDClient reads those Secrets; nil means the default cluster's client.
	ArgoCDClient kubernetes.Interface
	// Runtime is what every cluster's Runtime is built from (clients' use, caches,
	// Attacher, watchers, sweeper).
	Runtime RuntimeOptions
	// Directory, when set, is the routing table the registry fills (the dispatcher's);
	// nil: a Directory of its own.
	Directory *Directory
	// Ownership, when set, decides which registered clusters run on this replica (a
	// fleet, package shard); nil: every one of them.
	Ownership Ownership
	// ProbeInterval and ProbeTimeout pace the health probe (GET /readyz) of each
	// cluster; zero means DefaultProbeInterval and DefaultProbeTimeout.
	ProbeInterval, ProbeTimeout time.Duration
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// ExecPlugins are the credential plugins Argo CD cluster Secrets may name
	// (serve --allow-exec-plugin); nil allows none.
	ExecPlugins *ExecPolicy
	// ExecTimeout bounds one run of a kubeconfig context's exec plugin (serve
	// --exec-plugin-timeout), which the registry runs instead of client-go; zero:
	// ExecPlugins' timeout, else DefaultExecTimeout.
	ExecTimeout time.Duration
	// MaxClusters caps the clusters served, static ones included (serve
	// --max-clusters); Argo CD Secrets beyond it are refused. Zero: no cap.
	MaxClusters int
	// RequestTimeout bounds every request to a cluster but watches
	// (DefaultRequestTimeout when zero).
	RequestTimeout time.Duration
	// StartupDeadline bounds the start-up readiness gate (DefaultStartupDeadline when
	// zero): Ready waits until every cluster known at start is in sync or down, or this
	// long after Run (docs/design.md, "Readiness at start-up").
	StartupDeadline time.Duration
}

// Cluster is one registered cluster as other packages use it.
type Cluster struct {
	// Spec is how the cluster is reached.
	Spec Spec
	// Clients are the cluster's own clients.
	Clients *kube.Clients
	// Reader is the informer-backed reader (live reads on cache misses).
	Reader core.Reader
	// Attacher is the cluster's core.
	Attacher *core.Attacher
	// Caches are the cluster's informer caches behind Reader: one for all namespaces, or
	// one per namespace of Spec.Namespaces (for per-cluster watchers).
	Caches []*cache.Cache
}

// Name returns the cluster's name.
func (c *Cluster) Name() string { return c.Spec.Name }

// Status is the state of one cluster (or of an Argo CD Secret that could not be
// registered), for /readyz, metrics and the status command.
type Status struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Origin string `json:"origin,omitempty"`
	Server string `json:"server,omitempty"`
	// Default marks the cluster events without a cluster name go to.
	Default    bool     `json:"default,omitempty"`
	Namespaces []string `json:"namespaces,omitempty"`
	// Registered is false for an Argo CD Secret that is invalid or conflicts.
	Registered bool `json:"registered"`
	// Reachable: the last health probe succeeded. Synced: the caches have listed.
	Reachable bool `json:"reachable"`
	Synced    bool `json:"synced"`
	// Healthy is Registered && Reachable && Synced.
	Healthy bool `json:"healthy"`
	// Error is why the cluster is not healthy (probe error, invalid Secret, conflict).
	Error string `json:"error,omitempty"`
	// Reason classifies why an Argo CD Secret is not registered (Reason* constants);
	// Conflicts names the other Secrets of a duplicate name or server.
	Reason    string   `json:"reason,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
	// Elsewhere: another replica of the fleet owns the cluster and runs it (this
	// replica forwards its events there); Healthy is then true.
	Elsewhere bool `json:"elsewhere,omitempty"`
	// LastProbe is when the last probe ended; Since when Reachable last changed.
	LastProbe time.Time `json:"lastProbe,omitzero"`
	Since     time.Time `json:"since,omitzero"`
}

// Registry is the set of served clusters. Create it with New, start it with Run. It is
// safe for concurrent use.
type Registry struct {
	opts Options
	log  *slog.Logger

	mu      sync.RWMutex
	members map[string]*member
	secrets map[string]string // Argo CD Secret namespace/name -> registered cluster name
	invalid map[string]Status // Argo CD Secret namespace/name -> why it is not registered
	claims  map[string]*claim // every Argo CD cluster Secret seen, by namespace/name
	// argoListed: the first list of Argo CD Secrets has reached the handlers; until
	// then nothing is admitted (admission.go decides on all of them at once).
	argoListed atomic.Bool
	// argoAdmitted: the first list of Argo CD Secrets has been admitted (their clusters
	// routed); until then an unknown cluster name may be one of theirs (Directory.pending).
	argoAdmitted atomic.Bool
	argoEvents   *argoEvents
	runCtx       context.Context
	wg           sync.WaitGroup
	running      atomic.Bool
	argoSync     atomic.Pointer[toolscache.InformerSynced]
	defName      string
	dir          *Directory
	// home recognises the Secrets naming the home cluster (homealias.go); aliases maps
	// the names of those admitted to the home's, aliasKeys their Secrets to their names.
	home      homeCluster
	aliases   map[string]string
	aliasKeys map[string]string
	// gate holds Ready false until start-up is over (startgate.go).
	gate *startupGate
}

type member struct {
	c           Cluster
	secret      string // Argo CD Secret namespace/name, "" for static clusters
	fingerprint string
	// pin is the shard an Argo CD Secret's `shard` field names, -1 for none.
	pin int
	// rt is the cluster's runtime while it runs here (built ahead for a static cluster
	// of a single replica); cancel stops it and done is closed when it has stopped.
	rt           *Runtime
	cancel       context.CancelFunc
	done         chan struct{}
	healthMu     sync.Mutex
	reachable    bool
	probed       bool
	probeErr     string
	lastProbe    time.Time
	reachableChg time.Time
}

// New validates opts and builds the static clusters' clients, caches and Attachers
// (nothing is contacted or started until Run).
func New(opts Options) (*Registry, error) {
	if len(opts.Clusters) == 0 {
		return nil, errors.New("cluster: at least one cluster is required")
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if opts.Runtime.Logger == nil {
		opts.Runtime.Logger = log
	}
	if opts.Runtime.Startups == nil {
		opts.Runtime.Startups = NewStartups(0)
	}
	if opts.Runtime.RequestTimeout == 0 {
		opts.Runtime.RequestTimeout = opts.RequestTimeout
	}
	if opts.StartupDeadline <= 0 {
		opts.StartupDeadline = DefaultStartupDeadline
	}
	r := &Registry{opts: opts, log: log.With("component", "clusters"), members: map[string]*member{},
		secrets: map[string]string{}, invalid: map[string]Status{}, claims: map[string]*claim{}, dir: opts.Directory,
		gate: &startupGate{deadline: opts.StartupDeadline}}
	if opts.MaxClusters > 0 && len(opts.Clusters) > opts.MaxClusters {
		return nil, fmt.Errorf("cluster: %d clusters given, more than the cap of %d (--max-clusters)", len(opts.Clusters), opts.MaxClusters)
	}
	if r.dir == nil {
		r.dir = NewDirectory(false)
	}
	for _, sp := range opts.Clusters {
		if err := ValidateName(sp.Name); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if _, dup := r.members[sp.Name]; dup {
			return nil, fmt.Errorf("cluster: %q is registered twice", sp.Name)
		}
		m, err := r.newMember(sp)
		if err != nil {
			return nil, err
		}
		r.members[sp.Name] = m
	}
	r.home = homeClusterOf(opts.Clusters)
	r.defName = opts.Default
	if r.defName == "" {
		r.defName = opts.Clusters[0].Name
	}
	if _, ok := r.members[r.defName]; !ok {
		return nil, fmt.Errorf("cluster: default cluster %q is not among the clusters (%s)", r.defName, strings.Join(r.Names(), ", "))
	}
	r.dir.setDefault(r.defName)
	if opts.ArgoCDNamespace != "" {
		r.dir.setPending(func() bool { return !r.argoAdmitted.Load() })
	}
	if opts.Ownership != nil {
		r.dir.setOwner(r.ownerOf)
		opts.Ownership.Notify(r.Reconcile)
	}
	for name, m := range r.members {
		r.dir.set(name, route{rt: m.rt, health: m.down}) // rt nil: owned elsewhere until Run says otherwise
	}
	return r, nil
}

// newMember builds the registration of cluster sp, with credentials of its own (a new
// runner of its credential plugin, closed when the registration ends: r.stop).
func (r *Registry) newMember(sp Spec) (*member, error) {
	if sp.Config == nil {
		return nil, fmt.Errorf("cluster %q: no client configuration", sp.Name)
	}
	timeout := r.opts.ExecTimeout
	if timeout <= 0 {
		timeout = r.opts.ExecPlugins.timeout()
	}
	sp, err := sp.withCredentials(timeout)
	if err != nil {
		return nil, err
	}
	m := &member{c: Cluster{Spec: sp}, pin: -1}
	if r.opts.Ownership != nil {
		// Its runtime is built when this replica comes to own it; a client that cannot
		// be built is refused now, as without a fleet (docs/design.md, "Fleet").
		if err := clientBuilds(sp.Config); err != nil {
			sp.closeCredentials()
			return nil, fmt.Errorf("cluster %q: %w", sp.Name, err)
		}
		return m, nil
	}
	rt, err := NewRuntime(sp, r.opts.Runtime)
	if err != nil {
		sp.closeCredentials()
		return nil, err
	}
	m.rt, m.c = rt, rt.Cluster
	return m, nil
}

// clientBuilds checks what building cfg's clients checks offline: its server URL and
// its TLS material (a CA or client certificate that does not parse).
func clientBuilds(cfg *rest.Config) error {
	if _, _, err := rest.DefaultServerUrlFor(cfg); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	if _, err := rest.TLSConfigFor(cfg); err != nil {
		return fmt.Errorf("client configuration: %w", err)
	}
	return nil
}

// Directory returns the registry's routing table.
func (r *Registry) Directory() *Directory { return r.dir }

// DefaultName returns the name of the default cluster.
func (r *Registry) DefaultName() string { return r.defName }

// Names returns the registered cluster names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return sortedKeys(r.members)
}

// Cluster returns the registered cluster name ("" is the default) or a
// *core.FieldError for "cluster".
func (r *Registry) Cluster(name string) (*Cluster, error) {
	m, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	c := m.c
	return &c, nil
}

// Clusters returns the registered clusters named (all when names is empty), sorted by
// name. An unknown name is a *core.FieldError for "cluster".
func (r *Registry) Clusters(names ...string) ([]*Cluster, error) {
	if len(names) == 0 {
		names = r.Names()
	}
	out := make([]*Cluster, 0, len(names))
	for _, n := range names {
		c, err := r.Cluster(n)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (r *Registry) lookup(name string) (*member, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if name == "" {
		name = r.defName
	}
	m, ok := r.members[r.resolveAliasLocked(name)]
	if !ok {
		names := sortedKeys(r.members)
		if len(names) > 10 {
			names = append(names[:10], "…")
		}
		return nil, core.Invalidf("cluster", "unknown cluster %q (registered: %s)", core.Clip(name), strings.Join(names, ", "))
	}
	return m, nil
}

// Attacher implements dispatch.Clusters (Directory.Attacher of the registry's
// Directory).
func (r *Registry) Attacher(name string) (*core.Attacher, error) { return r.dir.Attacher(name) }

// Run starts every cluster's caches and health probe and, with
// Options.ArgoCDNamespace, the watch of Argo CD cluster Secrets, and blocks until ctx
// ends. It then stops everything and returns nil. A cluster that cannot be reached is
// reported unhealthy, never an error of Run.
func (r *Registry) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return errors.New("cluster: Run called twice")
	}
	r.mu.Lock()
	r.runCtx = ctx
	r.gate.begin(time.Now())
	for _, m := range r.members {
		r.startLocked(m)
	}
	if r.opts.ArgoCDNamespace == "" {
		r.gate.setKnown(sortedKeys(r.members)) // with Argo CD Secrets: at their first admission
	}
	r.mu.Unlock()

	if r.opts.ArgoCDNamespace != "" {
		client, err := r.argoCDClient()
		if err != nil {
			return err
		}
		if err := r.watchArgoCD(ctx, client); err != nil {
			return err
		}
	}
	<-ctx.Done()
	r.mu.Lock()
	for _, m := range r.members {
		m.c.Spec.closeCredentials() // kills a credential plugin still running
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.mu.Lock()
	for _, m := range r.members {
		if m.rt != nil && m.rt.Life() == nil {
			m.rt.Close() // built, never run
		}
	}
	r.mu.Unlock()
	r.log.Info("stopped")
	return nil
}

// startLocked starts m's runtime and health probe under the registry's Run context
// when this replica is to run it (see startOwnedLocked). r.mu must be held and Run must
// have begun.
func (r *Registry) startLocked(m *member) {
	if r.opts.Ownership != nil && !r.opts.Ownership.Owns(m.c.Spec.Name, m.pin) {
		r.dir.set(m.c.Spec.Name, route{})
		r.log.Info("cluster registered, owned by another replica", "cluster", m.c.Spec.Name, "source", m.c.Spec.Source,
			"origin", m.c.Spec.Origin)
		return
	}
	r.startOwnedLocked(m)
}

// startOwnedLocked builds m's runtime if need be and runs it with its health probe
// until m.cancel; m.done is closed once both have returned.
func (r *Registry) startOwnedLocked(m *member) {
	log := r.log.With("cluster", m.c.Spec.Name)
	if m.rt == nil {
		rt, err := NewRuntime(m.c.Spec, r.opts.Runtime)
		if err != nil {
			log.Error("cluster runtime not built", "error", err)
			return
		}
		m.healthMu.Lock()
		m.rt, m.c = rt, rt.Cluster
		m.healthMu.Unlock()
	}
	ctx, cancel := context.WithCancel(r.runCtx)
	done := make(chan struct{})
	m.cancel, m.done = cancel, done
	rt := m.rt
	r.wg.Add(1)
	go func() { // the cluster's one goroutine of its own: its probe is a timer (probes)
		defer r.wg.Done()
		stopProbes := r.probes(ctx, m)
		if err := rt.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("per-cluster work failed", "error", err)
		}
		<-ctx.Done() // probed until the stop, even if its work failed
		stopProbes()
		close(done) // not m.done: a release clears it (ownership.go)
	}()
	r.dir.set(m.c.Spec.Name, route{rt: rt, health: m.down})
	log.Info("cluster registered", "source", m.c.Spec.Source, "origin", m.c.Spec.Origin, "server", m.c.Spec.Server(),
		"namespaces", m.c.Spec.Namespaces)
}

// down reports whether m's last health probe failed, and why.
func (m *member) down() (bool, string) {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	return m.probed && !m.reachable, m.probeErr
}

// probes probes m now and every ProbeInterval after the previous probe until ctx ends,
// each on a timer's goroutine: no goroutine waits between probes (docs/design.md,
// "Per-cluster cost"). stop, called once ctx has ended, waits for a probe under way.
func (r *Registry) probes(ctx context.Context, m *member) (stop func()) {
	var mu sync.Mutex // held by a probe; stopped under it
	stopped := false
	var t *time.Timer
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(0, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || ctx.Err() != nil {
			return
		}
		r.probe(ctx, m)
		t.Reset(r.opts.ProbeInterval)
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// probe asks the cluster's /readyz (readable by any user: system:public-info-viewer).
func (r *Registry) probe(ctx context.Context, m *member) {
	pctx, cancel := context.WithTimeout(ctx, r.opts.ProbeTimeout)
	defer cancel()
	_, err := m.c.Clients.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(pctx)
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	m.healthMu.Lock()
	was, first := m.reachable, !m.probed
	m.probed, m.lastProbe = true, now
	m.reachable = err == nil
	m.probeErr = ""
	if err != nil {
		m.probeErr = core.OneLine(err.Error())
	}
	if first || was != m.reachable {
		m.reachableChg = now
	}
	m.healthMu.Unlock()
	log := r.log.With("cluster", m.c.Spec.Name)
	switch {
	case err != nil && (first || was):
		log.Warn("cluster unreachable", "server", m.c.Spec.Server(), "error", err)
	case err == nil && !first && !was:
		log.Info("cluster reachable again", "server", m.c.Spec.Server())
	}
}

func (m *member) synced() bool { return m.rt != nil && m.rt.Synced() }

func (m *member) status(def bool) Status {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	st := Status{Name: m.c.Spec.Name, Source: m.c.Spec.Source, Origin: m.c.Spec.Origin, Server: m.c.Spec.Server(),
		Default: def, Namespaces: m.c.Spec.Namespaces, Registered: true, Reachable: m.reachable, Synced: m.synced(),
		LastProbe: m.lastProbe, Since: m.reachableChg}
	if m.rt == nil { // owned by another replica of the fleet (ownership.go)
		return elsewhere(st)
	}
	switch {
	case !m.probed:
		st.Error = "not probed yet"
	case !m.reachable:
		st.Error = m.probeErr
	case !st.Synced:
		st.Error = "caches not synced"
	}
	st.Healthy = st.Reachable && st.Synced
	return st
}

// Statuses returns the state of every registered cluster and of every Argo CD Secret
// that could not be registered, sorted by name.
func (r *Registry) Statuses() []Status {
	r.mu.RLock()
	out := make([]Status, 0, len(r.members)+len(r.invalid))
	for name, m := range r.members {
		out = append(out, m.status(name == r.defName))
	}
	for _, st := range r.invalid {
		out = append(out, st)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Origin < out[j].Origin
	})
	return out
}

// Healthy reports whether cluster name ("" is the default) is registered, reachable
// and synced.
func (r *Registry) Healthy(name string) bool {
	m, err := r.lookup(name)
	if err != nil {
		return false
	}
	return m.status(false).Healthy
}

// Ready is the service's readiness: the default cluster is healthy, with Argo CD
// Secrets their first list is done, and start-up is over (every cluster known at start
// in sync or down, or the start-up deadline passed: startgate.go). Other clusters being
// down does not make the service unready (it keeps serving the healthy ones); Readiness
// says which are down.
func (r *Registry) Ready() bool {
	if p := r.argoSync.Load(); r.opts.ArgoCDNamespace != "" && (p == nil || !(*p)()) {
		return false
	}
	return r.Healthy("") && r.startup().open
}

// StartupSummary is one line saying what start-up still waits for, "" once it is
// over; it names no cluster (for /readyz without the token; Readiness names them).
func (r *Registry) StartupSummary() string {
	d := r.startup()
	if d.open {
		return ""
	}
	deadline, _ := r.gate.deadlineAt()
	return d.summary(max(0, time.Until(deadline)))
}

// Readiness returns Ready and a text report, one line per cluster: "NAME ok" or
// "NAME DOWN: reason" (for /readyz bodies and logs).
func (r *Registry) Readiness() (bool, string) {
	var b strings.Builder
	for _, st := range r.Statuses() {
		state := "ok"
		if st.Elsewhere {
			state = "ok, owned by another replica"
		} else if !st.Healthy {
			state = "DOWN: " + st.Error
		}
		def := ""
		if st.Default {
			def = " (default)"
		}
		fmt.Fprintf(&b, "%s%s %s\n", st.Name, def, state)
	}
	if p := r.argoSync.Load(); r.opts.ArgoCDNamespace != "" && (p == nil || !(*p)()) {
		fmt.Fprintf(&b, "argocd-secrets (%s) DOWN: not listed yet\n", r.opts.ArgoCDNamespace)
	}
	if names := r.startup().detail(); names != "" {
		fmt.Fprintln(&b, names) // StartupSummary says how many, to anyone
	}
	return r.Ready(), b.String()
}

// watchArgoCD starts the informer on Argo CD cluster Secrets; it stops with ctx.
func (r *Registry) watchArgoCD(ctx context.Context, client kubernetes.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(client, DefaultArgoCDResync,
		informers.WithNamespace(r.opts.ArgoCDNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = ArgoCDSecretTypeLabel + "=" + ArgoCDSecretTypeCluster
		}))
	inf := f.Core().V1().Secrets().Informer()
	handler, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.upsertSecret(obj) },
		UpdateFunc: func(_, obj any) { r.upsertSecret(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*corev1.Secret); ok {
				r.removeSecret(s.Namespace + "/" + s.Name)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("cluster: Argo CD Secret handler: %w", err)
	}
	var synced toolscache.InformerSynced = r.argoAdmitted.Load // listed and admitted: their clusters routed
	r.argoSync.Store(&synced)
	r.argoEvents = newArgoEvents(client)
	f.Start(ctx.Done())
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		<-ctx.Done()
		f.Shutdown()
		r.argoEvents.stop()
	}()
	go func() {
		defer r.wg.Done()
		r.admitWhenListed(ctx, handler.HasSynced)
	}()
	r.log.Info("watching Argo CD cluster Secrets", "namespace", r.opts.ArgoCDNamespace)
	return nil
}

// admitWhenListed waits until the handlers have seen the first list of Argo CD
// Secrets, then admits them all at once: a duplicate is refused from the start, never
// served for a moment because its twin sorted later.
func (r *Registry) admitWhenListed(ctx context.Context, listed toolscache.InformerSynced) {
	if !toolscache.WaitForCacheSync(ctx.Done(), listed) {
		return
	}
	r.mu.Lock()
	r.argoListed.Store(true)
	stopped := r.reconcileLocked()
	r.argoAdmitted.Store(true)
	r.gate.setKnown(sortedKeys(r.members))
	r.mu.Unlock()
	for _, m := range stopped {
		r.stop(m)
	}
}

func (r *Registry) upsertSecret(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	c := r.newClaim(s)
	r.mu.Lock()
	if r.runCtx == nil || r.runCtx.Err() != nil {
		r.mu.Unlock()
		return
	}
	if old, ok := r.claims[c.key]; ok && old.fp == c.fp && old.pin == c.pin {
		r.mu.Unlock()
		return // resync or an irrelevant change
	}
	r.claims[c.key] = c
	stopped := r.reconcileLocked()
	r.mu.Unlock()
	for _, m := range stopped {
		r.stop(m)
	}
}

func (r *Registry) removeSecret(key string) {
	r.mu.Lock()
	delete(r.claims, key)
	stopped := r.reconcileLocked()
	r.mu.Unlock()
	for _, m := range stopped {
		r.stop(m)
	}
}

// unregisterLocked removes the cluster registered by Secret key and returns it (nil if
// none). r.mu must be held.
func (r *Registry) unregisterLocked(key string) *member {
	name, ok := r.secrets[key]
	if !ok {
		return nil
	}
	delete(r.secrets, key)
	m := r.members[name]
	if m == nil || m.secret != key {
		return nil
	}
	delete(r.members, name)
	r.dir.drop(name, nil)
	return m
}

// stop cancels m's goroutines and, in the background, waits for them (m nil or not
// running here: nothing). It does not block: the caller is the Argo CD Secret handler,
// which must not wait on a cluster that no longer answers.
func (r *Registry) stop(m *member) {
	if m == nil {
		return
	}
	// The cluster is no longer served: a credential plugin still running is killed.
	// (Not on a release to another replica: the Spec, and its plugin, serve again if
	// ownership comes back.)
	m.c.Spec.closeCredentials()
	if m.cancel == nil {
		if m.rt != nil {
			m.rt.Close() // built, never run
		}
		return
	}
	m.cancel()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		<-m.done // the runtime flushed its Events; the cluster's clients are no longer used
		r.log.Info("cluster unregistered", "cluster", m.c.Spec.Name, "origin", m.c.Spec.Origin)
	}()
}
