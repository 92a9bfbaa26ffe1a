// Package server wires the long-running service behind `configmap-attacher serve`:
// Kubernetes clients, the informer cache, the core Attacher, and the gRPC custom
// trigger and HTTP receiver of package trigger. It is separate from the CLI so that
// other commands (a local dev mode) and tests can run the service in-process.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// Options configure a Server. The zero value of each field means its default.
type Options struct {
	// GRPCAddr and HTTPAddr are the listen addresses (":9000", ":8080"); "-" disables a
	// server. Port 0 picks a free port (see Server.GRPCAddr / HTTPAddr).
	GRPCAddr, HTTPAddr string
	// TLSCertFile and TLSKeyFile, when set, serve TLS on both servers.
	TLSCertFile, TLSKeyFile string
	// ClusterName is the name of the cluster served (trigger.DefaultClusterName).
	ClusterName string
	// Namespace limits the caches to one namespace; empty means all.
	Namespace string
	// MaxInFlight bounds concurrent events (trigger.DefaultMaxInFlight).
	MaxInFlight int
	// ExecuteTimeout bounds one event (trigger.DefaultExecuteTimeout).
	ExecuteTimeout time.Duration
	// MaxBodyBytes bounds an HTTP request body.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown (30s).
	ShutdownTimeout time.Duration
	// AllowSecrets lets events that ask for it attach Secrets (and caches Secret metadata).
	AllowSecrets bool
	// BlockOwnerDeletion sets blockOwnerDeletion on added ownerReferences.
	BlockOwnerDeletion bool
	// TLSClientCAFile, when set (with TLS), requires client certificates signed by this
	// CA bundle on both servers (mutual TLS).
	TLSClientCAFile string
	// HTTPToken, when set, is the bearer token the HTTP receiver requires
	// (trigger.HTTPOptions.AuthToken); PublicMetrics exempts /metrics.
	HTTPToken     []byte
	PublicMetrics bool
	// Namespaces restricts the namespaces events may act in (core.Config.Namespaces).
	Namespaces core.NamespacePolicy
	// ProbeInterval paces the health probe of the served cluster(s) (GET /readyz of each
	// apiserver; cluster.DefaultProbeInterval). While a probe fails the service is not
	// ready and events for that cluster are answered "unavailable, retry".
	ProbeInterval time.Duration
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// Clusters, when set, serves several clusters: New builds no registry of its own
	// (its rest.Config may be nil; the cluster options above other than the listeners'
	// are the registry's). Without it New serves the one cluster of its rest.Config
	// through a registry of one, named ClusterName.
	Clusters *cluster.Registry
}

// Defaults of Options.
const (
	DefaultGRPCAddr = ":9000"
	DefaultHTTPAddr = ":8080"
)

// Server is one configmap-attacher service for one or several clusters. Create it with
// New (which binds the listeners), then Run or RunWith it.
type Server struct {
	opts Options
	log  *slog.Logger
	reg  *cluster.Registry
	svc  *trigger.Service
	grpc *trigger.GRPCServer
	http *trigger.HTTPServer
	// checks are more readiness conditions (the EventBus subscription), set before Run.
	checks []func() (bool, string)
}

// readiness is the service's readiness and its /readyz detail: the registry's (the
// default cluster is reachable and synced; one line per cluster) and every other check
// (one line each).
func (s *Server) readiness() (bool, string) {
	ok, detail := s.reg.Readiness()
	for _, check := range s.checks {
		cok, cdetail := check()
		ok = ok && cok
		detail += cdetail + "\n"
	}
	return ok, detail
}

// New builds the cluster registry (one cluster from cfg, or o.Clusters), the trigger
// service and both servers, and binds the listeners so that addresses are known and
// port conflicts fail here. Nothing is contacted until Run. Errors: bad TLS files,
// listen failures, client construction failures.
func New(cfg *rest.Config, o Options) (*Server, error) {
	if cfg == nil && o.Clusters == nil {
		return nil, errors.New("server: nil rest.Config")
	}
	if o.GRPCAddr == "" {
		o.GRPCAddr = DefaultGRPCAddr
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = DefaultHTTPAddr
	}
	if o.ClusterName == "" {
		o.ClusterName = trigger.DefaultClusterName
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	tlsCfg, err := trigger.LoadTLS(o.TLSCertFile, o.TLSKeyFile)
	if err != nil {
		return nil, err
	}
	if tlsCfg, err = trigger.WithClientCA(tlsCfg, o.TLSClientCAFile); err != nil {
		return nil, err
	}
	reg := o.Clusters
	if reg == nil {
		reg, err = cluster.New(cluster.Options{
			Clusters:  []cluster.Spec{{Name: o.ClusterName, Source: cluster.SourceHome, Origin: "--kubeconfig/--context", Config: cfg}},
			Namespace: o.Namespace, AllowSecrets: o.AllowSecrets, BlockOwnerDeletion: o.BlockOwnerDeletion,
			Namespaces: o.Namespaces, ProbeInterval: o.ProbeInterval, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	s := &Server{opts: o, log: log, reg: reg}
	s.svc, err = trigger.NewService(trigger.Config{Clusters: reg, MaxInFlight: o.MaxInFlight,
		ExecuteTimeout: o.ExecuteTimeout, Logger: log,
		Ready:       func() bool { ok, _ := s.readiness(); return ok },
		ReadyDetail: func() string { _, d := s.readiness(); return d }})
	if err != nil {
		return nil, err
	}
	if err := s.svc.Metrics().Registry.Register(reg.Collector()); err != nil {
		return nil, fmt.Errorf("server: cluster metrics: %w", err)
	}
	if err := s.listen(tlsCfg); err != nil {
		return nil, err
	}
	return s, nil
}

// listen binds the enabled listeners and builds the servers on them.
func (s *Server) listen(tlsCfg *tls.Config) error {
	o, svc := s.opts, s.svc
	var err error
	var glis, hlis net.Listener
	if o.GRPCAddr != "-" {
		if glis, err = net.Listen("tcp", o.GRPCAddr); err != nil {
			return fmt.Errorf("gRPC listen on %s: %w", o.GRPCAddr, err)
		}
	}
	if o.HTTPAddr != "-" {
		if hlis, err = net.Listen("tcp", o.HTTPAddr); err != nil {
			if glis != nil {
				_ = glis.Close()
			}
			return fmt.Errorf("HTTP listen on %s: %w", o.HTTPAddr, err)
		}
	}
	if glis != nil {
		s.grpc = trigger.NewGRPCServer(svc, glis, trigger.GRPCOptions{TLS: tlsCfg, ShutdownTimeout: o.ShutdownTimeout})
	}
	if hlis != nil {
		s.http = trigger.NewHTTPServer(svc, hlis, trigger.HTTPOptions{TLS: tlsCfg, MaxBodyBytes: o.MaxBodyBytes, ShutdownTimeout: o.ShutdownTimeout,
			AuthToken: o.HTTPToken, PublicMetrics: o.PublicMetrics})
	}
	return nil
}

// GRPCAddr returns the gRPC listener's address, or "" when disabled.
func (s *Server) GRPCAddr() string {
	if s.grpc == nil {
		return ""
	}
	return s.grpc.Addr().String()
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

// Service returns the trigger service both servers call.
func (s *Server) Service() *trigger.Service { return s.svc }

// Run starts the clusters' caches and health probes and both servers and blocks until
// ctx ends or one of them fails. On shutdown both servers stop taking work and finish
// what is in flight. It returns nil after a clean shutdown, the first failure otherwise.
// Readiness (/readyz) is the default cluster's health: its apiserver answers its probe
// and its caches have synced.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.reg.Run(gctx) })
	if s.grpc != nil {
		g.Go(func() error { return s.grpc.Run(gctx) })
	}
	if s.http != nil {
		g.Go(func() error { return s.http.Run(gctx) })
	}
	s.log.Info("serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "clusters", s.reg.Names(), "default", s.reg.DefaultName(),
		"tls", s.opts.TLSCertFile != "", "mtls", s.opts.TLSClientCAFile != "", "httpAuth", len(s.opts.HTTPToken) > 0,
		"namespaces", s.opts.Namespaces.String())
	err := g.Wait()
	s.svc.Wait()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}
