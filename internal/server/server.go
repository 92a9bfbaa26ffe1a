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

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
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
	// Logger receives logs; nil means slog.Default().
	Logger *slog.Logger
	// Clusters, when set, serves several clusters (package cluster's Registry): New then
	// builds no clients or cache of its own (its rest.Config may be nil), Run runs the
	// registry, and readiness and /readyz come from it.
	Clusters Clusters
}

// Clusters is a multi-cluster registry as the server runs it (cluster.Registry).
type Clusters interface {
	trigger.Clusters
	// Run runs every cluster's caches and health until ctx ends.
	Run(ctx context.Context) error
	// Readiness reports whether the service is ready and one line per cluster.
	Readiness() (bool, string)
	// Collector exports per-cluster metrics.
	Collector() prometheus.Collector
}

// Defaults of Options.
const (
	DefaultGRPCAddr = ":9000"
	DefaultHTTPAddr = ":8080"
)

// Server is one configmap-attacher service for one cluster. Create it with New (which
// binds the listeners), then Run it.
type Server struct {
	opts    Options
	log     *slog.Logger
	clients *kube.Clients
	cache   *cache.Cache
	svc     *trigger.Service
	// att is the single cluster's Attacher, shared by every ingress path (nil with Clusters).
	att  *core.Attacher
	grpc *trigger.GRPCServer
	http *trigger.HTTPServer
}

// New builds the clients from cfg, the cache, the core and both servers, and binds the
// listeners so that addresses are known and port conflicts fail here. Errors: bad TLS
// files, listen failures, client construction failures.
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
	if o.Clusters != nil {
		return newMulti(o, log, tlsCfg)
	}
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(clients, cache.Options{Namespace: o.Namespace, Secrets: o.AllowSecrets, Logger: log})
	if err != nil {
		return nil, err
	}
	recorder, _ := kube.NewBroadcastRecorder(clients.Kube) // lives as long as the process
	a, err := core.NewAttacher(core.Config{Cluster: o.ClusterName, Client: clients.Kube, Reader: c, Recorder: recorder,
		BlockOwnerDeletion: o.BlockOwnerDeletion, AllowSecrets: o.AllowSecrets, Namespaces: o.Namespaces, Logger: log})
	if err != nil {
		return nil, err
	}
	clusters, err := trigger.NewSingleCluster(o.ClusterName, a)
	if err != nil {
		return nil, err
	}
	svc, err := trigger.NewService(trigger.Config{Clusters: clusters, MaxInFlight: o.MaxInFlight,
		ExecuteTimeout: o.ExecuteTimeout, Ready: c.HasSynced, Logger: log})
	if err != nil {
		return nil, err
	}
	s := &Server{opts: o, log: log, clients: clients, cache: c, svc: svc, att: a}
	if err := s.listen(tlsCfg); err != nil {
		return nil, err
	}
	return s, nil
}

// newMulti builds a Server over o.Clusters.
func newMulti(o Options, log *slog.Logger, tlsCfg *tls.Config) (*Server, error) {
	svc, err := trigger.NewService(trigger.Config{Clusters: o.Clusters, MaxInFlight: o.MaxInFlight,
		ExecuteTimeout: o.ExecuteTimeout, Logger: log,
		Ready:       func() bool { ok, _ := o.Clusters.Readiness(); return ok },
		ReadyDetail: func() string { _, d := o.Clusters.Readiness(); return d }})
	if err != nil {
		return nil, err
	}
	if err := svc.Metrics().Registry.Register(o.Clusters.Collector()); err != nil {
		return nil, fmt.Errorf("server: cluster metrics: %w", err)
	}
	s := &Server{opts: o, log: log, svc: svc}
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

// Cache returns the informer cache (for readiness checks and tests); nil with Options.Clusters.
func (s *Server) Cache() *cache.Cache { return s.cache }

// Service returns the trigger service both servers call.
func (s *Server) Service() *trigger.Service { return s.svc }

// Run starts the cache and both servers and blocks until ctx ends or one of them
// fails. On shutdown both servers stop taking work and finish what is in flight. It
// returns nil after a clean shutdown, the first failure otherwise.
func (s *Server) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if s.opts.Clusters != nil {
		g.Go(func() error { return s.opts.Clusters.Run(gctx) })
	} else {
		g.Go(func() error { return s.cache.Run(gctx) })
	}
	if s.grpc != nil {
		g.Go(func() error { return s.grpc.Run(gctx) })
	}
	if s.http != nil {
		g.Go(func() error { return s.http.Run(gctx) })
	}
	s.log.Info("serving", "grpc", s.GRPCAddr(), "http", s.HTTPAddr(), "cluster", s.opts.ClusterName,
		"tls", s.opts.TLSCertFile != "", "mtls", s.opts.TLSClientCAFile != "", "httpAuth", len(s.opts.HTTPToken) > 0,
		"namespaces", s.opts.Namespaces.String())
	g.Go(func() error {
		if s.opts.Clusters != nil {
			return nil // readiness is per cluster: see /readyz
		}
		if err := s.cache.WaitForSync(gctx); err != nil {
			return nil // shutting down before sync is not a failure
		}
		s.log.Info("caches synced; ready")
		return nil
	})
	err := g.Wait()
	s.svc.Wait()
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("stopped")
	return nil
}
