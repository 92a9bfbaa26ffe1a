package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/shard"
)

// FleetOptions turn on sharing the served clusters among replicas (serve --fleet,
// docs/design.md "Fleet"): each cluster is run by the one replica holding its shard's
// Lease; the others forward its events there.
type FleetOptions struct {
	// Namespace holds the fleet's Leases (in the default cluster). Required.
	Namespace string
	// Shards is the number of shard Leases (shard.DefaultShards).
	Shards int
	// Identity names this replica (default: the host name, the pod's name).
	Identity string
	// Addr is the listen address of the forwarding endpoint (":9443"); Advertise is
	// the address other replicas reach it at (default: Addr's, which must then name a
	// host).
	Addr, Advertise string
	// LeaseDuration, RenewDeadline and RetryPeriod pace the Leases (shard defaults).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LeaseQPS and LeaseBurst bound the Lease client of its own (20, 40).
	LeaseQPS   float32
	LeaseBurst int
}

// DefaultFleetAddr is FleetOptions.Addr's default.
const DefaultFleetAddr = ":9443"

// fleet is a server's share of the fleet: its shard Leases and the forwarding endpoint.
type fleet struct {
	m      *shard.Manager
	lis    net.Listener
	client *forwardClient
	fwd    *forwardServer // built on the dispatcher (serve)
}

// newFleet binds the forwarding endpoint and builds the shard manager, on a Lease
// client of its own to the default cluster of ro. Nil without o.Fleet.
func (s *Server) newFleet(ro cluster.Options, tlsCfg *tls.Config) (*fleet, error) {
	fo := s.opts.Fleet
	if fo == nil {
		return nil, nil
	}
	if fo.Namespace == "" {
		return nil, errors.New("server: the fleet needs a Lease namespace")
	}
	if fo.Addr == "" {
		fo.Addr = DefaultFleetAddr
	}
	lis, err := net.Listen("tcp", fo.Addr)
	if err != nil {
		return nil, fmt.Errorf("fleet listen on %s: %w", fo.Addr, err)
	}
	adv, err := advertise(fo.Advertise, lis.Addr())
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	if len(ro.Clusters) == 0 {
		_ = lis.Close()
		return nil, errors.New("server: no cluster to serve")
	}
	client, err := leaseClient(defaultSpec(ro).Config, fo)
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	m, err := shard.New(shard.Options{Client: client.Kube, Namespace: fo.Namespace, Shards: fo.Shards, Identity: fo.Identity,
		Address: adv, LeaseDuration: fo.LeaseDuration, RenewDeadline: fo.RenewDeadline, RetryPeriod: fo.RetryPeriod, Logger: s.log})
	if err != nil {
		_ = lis.Close()
		return nil, err
	}
	return &fleet{m: m, lis: lis, client: newForwardClient(tlsCfg, s.opts.HTTPToken)}, nil
}

// bind builds the forwarding endpoint on s's dispatcher and registers the fleet
// metrics over s's registry (nothing without a fleet).
func (f *fleet) bind(s *Server, metrics *dispatch.Metrics, tlsCfg *tls.Config) error {
	if f == nil {
		return nil
	}
	f.fwd = newForwardServer(f.lis, s.d, tlsCfg, s.opts.HTTPToken, f.client, s.log)
	f.m.SetClusters(s.reg.Pins)
	if err := metrics.Registry.Register(f.m.Collector()); err != nil {
		return fmt.Errorf("server: fleet metrics: %w", err)
	}
	return nil
}

// leaseClient is the fleet's client to the Leases: a copy of cfg with a rate limiter
// of its own, so that renewals never queue behind the cluster's other requests.
func leaseClient(cfg *rest.Config, fo *FleetOptions) (*kube.Clients, error) {
	c := rest.CopyConfig(cfg)
	c.RateLimiter = nil
	c.QPS, c.Burst = 20, 40
	if fo.LeaseQPS > 0 {
		c.QPS = fo.LeaseQPS
	}
	if fo.LeaseBurst > 0 {
		c.Burst = fo.LeaseBurst
	}
	cl, err := kube.NewClients(c)
	if err != nil {
		return nil, fmt.Errorf("fleet lease client: %w", err)
	}
	return cl, nil
}

// advertise is the address the other replicas forward to: adv, else the listener's
// when it names a host.
func advertise(adv string, bound net.Addr) (string, error) {
	if adv == "" {
		adv = bound.String()
	}
	host, port, err := net.SplitHostPort(adv)
	if err != nil {
		return "", fmt.Errorf("fleet advertise address %q: %w", adv, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return "", fmt.Errorf("fleet advertise address %q: name the host or IP the other replicas reach (--fleet-advertise, e.g. $(POD_IP):%s)", adv, port)
	}
	return adv, nil
}

// parts are the shard manager and the forwarding endpoint, to run.
func (f *fleet) parts() []func(context.Context) error {
	if f == nil {
		return nil
	}
	return []func(context.Context) error{f.m.Run, f.fwd.Run}
}

// ownership is the registry's view of the fleet (nil without one).
func (f *fleet) ownership() cluster.Ownership {
	if f == nil {
		return nil
	}
	return f.m
}

// forwarder is the dispatcher's (nil without a fleet).
func (f *fleet) forwarder() dispatch.Forwarder {
	if f == nil {
		return nil
	}
	return f.client
}
