// Package server builds the long-running service behind `configmap-attacher serve` in
// one constructor: the cluster registry (clients, caches, the core Attacher per
// cluster), the dispatcher, and every way in over it (gRPC custom trigger and HTTP
// receiver of package trigger, the EventBus subscription, the built-in watcher) plus
// the orphan sweepers. It is separate from the CLI so that the development harness and
// tests can run the service in-process.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/ops"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// Options configure a Server. The zero value of each field means its default.
type Options struct {
	// GRPCAddr and HTTPAddr are the listen addresses (":9000", ":8080"); "-" disables a
	// server. Port 0 picks a free port (see Server.GRPCAddr / HTTPAddr).
	GRPCAddr, HTTPAddr string
	// MetricsAddr is the ops listener's address: /metrics, /healthz, /readyz and, with
	// Pprof, /debug/pprof/ (package ops). serve's default is ops.DefaultAddr (":8081");
	// here "" or "-" turns it off, so that a service run in-process (tests, the dev
	// environment) binds no fixed port. The receiver still serves the first three for
	// one release (trigger.HTTPOptions.Ops).
	MetricsAddr string
	// Pprof serves the Go runtime's profiles on the ops listener, behind HTTPToken
	// (required with it). ProfilingAddr is the loopback listener without a token.
	Pprof bool
	// TLSCertFile and TLSKeyFile, when set, serve TLS on both servers.
	TLSCertFile, TLSKeyFile string
	// ClusterName is the name of the cluster served (dispatch.DefaultClusterName).
	ClusterName string
	// Namespace limits the caches to one namespace; empty means all.
	Namespace string
	// MaxInFlight bounds the events handled at once, every way in together
	// (dispatch.DefaultMaxInFlight).
	MaxInFlight int
	// ExecuteTimeout bounds one event, on every way in (dispatch.DefaultExecuteTimeout).
	ExecuteTimeout time.Duration
	// MaxBodyBytes bounds an HTTP request body.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown (30s): the events in flight get this
	// long to finish on every way in.
	ShutdownTimeout time.Duration
	// AllowSecrets lets the service attach Secrets (and caches Secret metadata): every
	// way in then includes Secrets unless an event's spec says includeSecrets=false.
	AllowSecrets bool
	// BlockOwnerDeletion sets blockOwnerDeletion on added ownerReferences.
	BlockOwnerDeletion bool
	// TLSClientCAFile, when set (with TLS), requires client certificates signed by this
	// CA bundle on both servers (mutual TLS).
	TLSClientCAFile string
	// HTTPToken, when set, is the bearer token the HTTP receiver requires
	// (trigger.HTTPOptions.AuthToken), and the ops listener for /metrics, /readyz's
	// detail and pprof; PublicMetrics exempts /metrics.
	HTTPToken     []byte
	PublicMetrics bool
	// Namespaces restricts the namespaces events may act in (core.Config.Namespaces).
	Namespaces core.NamespacePolicy
	// ReplicaSetWait bounds the wait of an event that outran the ReplicaSet informer
	// (cluster.Options.ReplicaSetWait).
	ReplicaSetWait time.Duration
	// ProbeInterval paces the health probe of the served cluster(s) (GET /readyz of each
	// apiserver; cluster.DefaultProbeInterval). While a probe fails the service is not
	// ready and events for that cluster are answered "unavailable, retry".
	ProbeInterval time.Duration
	// ExecTimeout bounds one run of the kubeconfig context's credential plugin, if any,
	// of the one cluster of New's rest.Config (cluster.Options.ExecTimeout; with
	// Clusters, that field is used instead).
	ExecTimeout time.Duration
	// ProfilingAddr, when set, serves the Go runtime's profiles (/debug/pprof/) on this
	// loopback address, on a listener of its own.
	ProfilingAddr string
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// Clusters, when set, serves several clusters: the registry's sources (its static
	// clusters, default, Argo CD Secrets). New sets the rest of its options (the
	// runtime of every cluster, the directory, the probe) from these Options, the one
	// way a registry is built; the rest.Config given to New may then be nil. Without it
	// New serves the one cluster of its rest.Config through a registry of one, named
	// ClusterName.
	Clusters *cluster.Options
	// Ingress selects the ways in beside gRPC and HTTP and the orphan sweep.
	Ingress Ingress
	// Fleet, when set, shares the clusters among the replicas (fleet.go); nil: this
	// replica runs every cluster, as a single replica does.
	Fleet *FleetOptions
	// StartupDeadline bounds the start-up readiness gate: /readyz waits until every
	// cluster known at start is in sync or down, or this long after Run
	// (cluster.Options.StartupDeadline; cluster.DefaultStartupDeadline when zero).
	StartupDeadline time.Duration
}

// Defaults of Options.
const (
	DefaultGRPCAddr = ":9000"
	DefaultHTTPAddr = ":8080"
)

// answerMargin is how much longer than the shutdown grace the servers wait, so that an
// event cut short at the end of the grace is still answered (retry-later).
const answerMargin = 3 * time.Second

// Server is one configmap-attacher service for one or several clusters: every way in
// over one dispatcher. Create it with New (which builds every part and binds the
// listeners), then Run it.
type Server struct {
	opts Options
	log  *slog.Logger
	reg  *cluster.Registry
	dir  *cluster.Directory
	d    *dispatch.Dispatcher
	sub  *eventbus.Subscriber
	// fleet is this replica's share of the fleet (nil without Options.Fleet).
	fleet *fleet
	grpc  *trigger.GRPCServer
	http  *trigger.HTTPServer
	ops   *ops.Server
	// drained is closed once every part but the ops listener has returned: the ops
	// listener serves until then (its /readyz 503 from the start of the shutdown).
	drained chan struct{}
	prof    *profiling
}

// perClusterInFlight is the dispatcher's bound for one cluster: half the slots when
// serving several clusters, so a member that hangs leaves the others half of them
// (docs/design.md, "Answers"); none with one cluster.
func (o Options) perClusterInFlight() int {
	if o.Clusters == nil {
		return 0
	}
	n := o.MaxInFlight
	if n <= 0 {
		n = dispatch.DefaultMaxInFlight
	}
	return max(1, n/2)
}

// New builds the whole service from o: the cluster registry (one cluster from cfg, or
// o.Clusters), the dispatcher, the sweepers, the EventBus subscription and both
// servers, and binds the listeners so that addresses are known and port conflicts fail
// here. Nothing is contacted until Run. Errors: bad options (core.ErrInvalid), bad TLS
// files, listen failures, client construction failures.
func New(cfg *rest.Config, o Options) (*Server, error) {
	if cfg == nil && o.Clusters == nil {
		return nil, errors.New("server: nil rest.Config")
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := trigger.LoadTLS(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	if tlsCfg, err = trigger.WithClientCA(tlsCfg, o.TLSClientCAFile); err != nil {
		return nil, err
	}
	s := &Server{opts: o, log: o.Logger, drained: make(chan struct{})}
	// What an empty spec means on this service; the dispatcher is its one holder
	// (ParseSpec, a Request without Options, Defaults).
	defaults := core.DefaultOptions()
	defaults.IncludeSecrets = o.AllowSecrets
	metrics := dispatch.NewMetrics()
	// The dispatcher routes through the directory, which the registry fills as cluster
	// runtimes start and stop: each part is whole when the next is built on it.
	ro := s.clusterOptions(cfg)
	s.dir = cluster.NewDirectory(o.Ingress.GC.Interval > 0)
	if s.fleet, err = s.newFleet(ro, tlsCfg); err != nil {
		return nil, err
	}
	s.d, err = dispatch.New(dispatch.Config{Clusters: s.dir, Sweeps: s.dir, Defaults: &defaults,
		MaxInFlight: o.MaxInFlight, MaxInFlightPerCluster: o.perClusterInFlight(), ExecuteTimeout: o.ExecuteTimeout,
		StopGrace: o.ShutdownTimeout, Metrics: metrics, Logger: s.log, Observe: newOptInNotes(s.log).observe,
		Forwarder: s.fleet.forwarder()})
	if err != nil {
		return nil, err
	}
	if s.reg, err = s.registry(ro, metrics); err != nil {
		return nil, err
	}
	if err := s.fleet.bind(s, metrics, tlsCfg); err != nil {
		return nil, err
	}
	if err := metrics.Registry.Register(s.reg.Collector()); err != nil {
		return nil, fmt.Errorf("server: cluster metrics: %w", err)
	}
	if s.sub, err = s.subscriber(metrics); err != nil {
		return nil, err
	}
	if err := s.listen(tlsCfg); err != nil {
		return nil, err
	}
	return s, nil
}

// withDefaults fills the defaults of o and validates what New cannot start with.
func (o Options) withDefaults() (Options, error) {
	if o.GRPCAddr == "" {
		o.GRPCAddr = DefaultGRPCAddr
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = DefaultHTTPAddr
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "-"
	}
	if o.ClusterName == "" {
		o.ClusterName = dispatch.DefaultClusterName
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, o.Ingress.validate()
}

// clusterOptions are the registry's sources: o.Clusters, or the one cluster of cfg.
func (s *Server) clusterOptions(cfg *rest.Config) cluster.Options {
	o := s.opts
	ro := cluster.Options{Clusters: []cluster.Spec{{Name: o.ClusterName, Source: cluster.SourceHome, Origin: "--kubeconfig/--context", Config: cfg}},
		ExecTimeout: o.ExecTimeout}
	if o.Clusters != nil {
		ro = *o.Clusters
	}
	return ro
}

// registry builds the cluster registry, the one way: the sources ro, every cluster's
// runtime from the server's options, the fleet's ownership when there is one.
func (s *Server) registry(ro cluster.Options, metrics *dispatch.Metrics) (*cluster.Registry, error) {
	o := s.opts
	if ro.Logger == nil {
		ro.Logger = s.log
	}
	if o.ProbeInterval > 0 {
		ro.ProbeInterval = o.ProbeInterval
	}
	if o.StartupDeadline > 0 {
		ro.StartupDeadline = o.StartupDeadline
	}
	ro.Directory, ro.Ownership = s.dir, s.fleet.ownership()
	var err error
	if ro.Runtime, err = s.runtimeOptions(ro, metrics); err != nil {
		return nil, err
	}
	reg, err := cluster.New(ro)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return reg, nil
}

// readiness is the service's readiness and its /readyz detail: the registry's (the
// default cluster is reachable and synced; one line per cluster) and the EventBus
// subscription's.
func (s *Server) readiness() (bool, string) {
	ok, detail := s.reg.Readiness()
	if s.fleet != nil {
		detail += s.fleet.m.Summary() + "\n"
	}
	if s.sub != nil {
		sok, sdetail := s.sub.Health()
		ok = ok && sok
		detail += sdetail + "\n"
	}
	return ok, detail
}

// listen binds the enabled listeners and builds the servers on them.
func (s *Server) listen(tlsCfg *tls.Config) error {
	o := s.opts
	var lis [3]net.Listener // gRPC, HTTP, ops
	for i, l := range []struct{ name, addr string }{{"gRPC", o.GRPCAddr}, {"HTTP", o.HTTPAddr}, {"ops", o.MetricsAddr}} {
		if l.addr == "-" {
			continue
		}
		var err error
		if lis[i], err = net.Listen("tcp", l.addr); err != nil {
			closeAll(lis[:i])
			return fmt.Errorf("%s listen on %s: %w", l.name, l.addr, err)
		}
	}
	opsHandler, err := s.opsHandler(tlsCfg)
	if err == nil && o.ProfilingAddr != "" {
		s.prof, err = newProfiling(o.ProfilingAddr)
	}
	if err != nil {
		closeAll(lis[:])
		return err
	}
	s.ops = ops.NewServer(opsHandler, lis[2])
	// The servers wait a little longer than the dispatcher's grace: work cancelled at
	// the end of the grace still gets its answer written.
	stop := o.ShutdownTimeout + answerMargin
	if lis[0] != nil {
		s.grpc = trigger.NewGRPCServer(s.d, lis[0], trigger.GRPCOptions{TLS: tlsCfg, ShutdownTimeout: stop})
	}
	if lis[1] != nil {
		s.http = trigger.NewHTTPServer(s.d, lis[1], trigger.HTTPOptions{TLS: tlsCfg, MaxBodyBytes: o.MaxBodyBytes, ShutdownTimeout: stop,
			AuthToken: o.HTTPToken, Ops: opsHandler})
	}
	return nil
}

// opsHandler builds the ops routes (internal/ops): the dispatcher's metrics, the
// service's readiness, the bearer token of the receiver. The ops listener serves TLS
// with the service's certificate but never asks for a client certificate: the kubelet's
// probes carry none.
func (s *Server) opsHandler(tlsCfg *tls.Config) (*ops.Handler, error) {
	o := s.opts
	oo := ops.Options{Gatherer: s.d.Metrics().Registry, Ready: s.readiness, Summary: s.reg.StartupSummary, PublicMetrics: o.PublicMetrics,
		Pprof: o.Pprof, ShutdownTimeout: o.ShutdownTimeout, Linger: s.drained}
	bearer := trigger.NewBearer(o.HTTPToken)
	if bearer != nil {
		oo.Authorized = bearer.Valid
	}
	if tlsCfg != nil {
		oo.TLS = tlsCfg.Clone()
		oo.TLS.ClientAuth = tls.NoClientCert
		if tlsCfg.ClientCAs != nil {
			// Mutual TLS guards the service: a certificate from the client CA is asked for
			// but not required (the kubelet's probes carry none), and it is what opens
			// /metrics and pprof, as the token does (docs/design.md, "The ops listener").
			oo.TLS.ClientAuth = tls.VerifyClientCertIfGiven
			oo.Authorized = func(r *http.Request) bool {
				return (r.TLS != nil && len(r.TLS.VerifiedChains) > 0) || (bearer != nil && bearer.Valid(r))
			}
		}
	}
	h, err := ops.NewHandler(oo)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return h, nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		if l != nil {
			_ = l.Close()
		}
	}
}

// GRPCAddr returns the gRPC listener's address, or "" when disabled.
func (s *Server) GRPCAddr() string {
	if s.grpc == nil {
		return ""
	}
	return s.grpc.Addr().String()
}

// MetricsAddr returns the ops listener's address, or "" when turned off.
func (s *Server) MetricsAddr() string {
	if a := s.ops.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// HTTPAddr returns the HTTP listener's address, or "" when disabled.
func (s *Server) HTTPAddr() string {
	if s.http == nil {
		return ""
	}
	return s.http.Addr().String()
}

// Cache returns the default cluster's (first) informer cache, for readiness checks and
// tests; nil if the default cluster is gone.
func (s *Server) Cache() *cache.Cache {
	c, err := s.reg.Cluster("")
	if err != nil || len(c.Caches) == 0 {
		return nil
	}
	return c.Caches[0]
}

// Clusters returns the registry the server serves.
func (s *Server) Clusters() *cluster.Registry { return s.reg }

// Dispatcher returns the dispatcher every way in calls.
func (s *Server) Dispatcher() *dispatch.Dispatcher { return s.d }

// Ready reports the service's readiness (what /readyz answers).
func (s *Server) Ready() bool { ok, _ := s.readiness(); return ok }

// Run runs every part until ctx ends or one of them fails: the clusters' caches and
// health probes (and per cluster, once its caches are in sync, its watcher and
// sweeper), the dispatcher, both servers, the EventBus subscription and the ops
// listener. On shutdown every way in stops taking work and what is in flight finishes
// (ShutdownTimeout); the ops listener answers /readyz 503 meanwhile and stops last. It
// returns nil after a clean shutdown, the first failure otherwise.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	var parts sync.WaitGroup
	part := func(run func(context.Context) error) {
		parts.Add(1)
		g.Go(func() error { defer parts.Done(); return run(gctx) })
	}
	part(s.reg.Run)
	part(s.d.Run)
	if s.grpc != nil {
		part(s.grpc.Run)
	}
	if s.http != nil {
		part(s.http.Run)
	}
	if s.prof != nil {
		part(s.prof.Run)
	}
	for _, run := range s.fleet.parts() {
		part(run)
	}
	if s.sub != nil {
		part(s.runSubscriber)
	}
	g.Go(func() error { return s.ops.Run(gctx) })
	go func() { parts.Wait(); close(s.drained) }()
	s.log.Info("serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "metrics", s.MetricsAddr(), "clusters", s.reg.Names(),
		"default", s.reg.DefaultName(), "watch", s.opts.Ingress.Watch, "eventbus", s.sub != nil, "gcInterval", s.opts.Ingress.GC.Interval,
		"profiling", s.opts.ProfilingAddr, "pprof", s.opts.Pprof, "tls", s.opts.TLSCertFile != "", "mtls", s.opts.TLSClientCAFile != "",
		"httpAuth", len(s.opts.HTTPToken) > 0, "namespaces", s.opts.Namespaces.String())
	if err := g.Wait(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}

// runSubscriber runs the EventBus subscription once the default cluster's caches are
// in sync, so that its first reads hit.
func (s *Server) runSubscriber(ctx context.Context) error {
	if c := s.Cache(); c != nil && c.WaitForSync(ctx) != nil {
		return nil
	}
	return s.sub.Run(ctx)
}
