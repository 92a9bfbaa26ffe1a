package cli

import (
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/shard"
)

// FleetFlags are serve's flags for sharing the clusters among replicas (--fleet).
type FleetFlags struct {
	Enabled              bool
	Namespace            string
	Shards               int
	Identity             string
	Addr, Advertise      string
	LeaseDuration, Renew time.Duration
	RetryPeriod          time.Duration
}

// DefaultFleetFlags are the flags' defaults.
func DefaultFleetFlags() FleetFlags {
	return FleetFlags{Shards: shard.DefaultShards, Addr: server.DefaultFleetAddr, LeaseDuration: shard.DefaultLeaseDuration,
		Renew: shard.DefaultRenewDeadline, RetryPeriod: shard.DefaultRetryPeriod}
}

// AddFlags binds the flags.
func (f *FleetFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Enabled, "fleet", f.Enabled, "share the served clusters among the replicas on Kubernetes Leases: each cluster is run by one replica, the others forward its events there (use with replicas > 1; the chart sets it)")
	fs.StringVar(&f.Namespace, "fleet-namespace", f.Namespace, "namespace of the fleet's Leases in the default cluster (default: the pod's namespace; outside a pod, the kubeconfig context's, else default)")
	fs.IntVar(&f.Shards, "fleet-shards", f.Shards, "number of shard Leases; every replica must use the same (Argo CD cluster Secrets' shard field pins a cluster to one)")
	fs.StringVar(&f.Identity, "fleet-identity", f.Identity, "this replica's name in the fleet's Leases (default: the host name, the pod's name)")
	fs.StringVar(&f.Addr, "fleet-addr", f.Addr, "listen address of the forwarding endpoint other replicas send this replica's clusters' events to (TLS and bearer token as the service's)")
	fs.StringVar(&f.Advertise, "fleet-advertise", f.Advertise, "address other replicas reach the forwarding endpoint at (default: $POD_IP and the --fleet-addr port)")
	fs.DurationVar(&f.LeaseDuration, "fleet-lease-duration", f.LeaseDuration, "how long a shard Lease or a member Lease lasts without renewal")
	fs.DurationVar(&f.Renew, "fleet-renew-deadline", f.Renew, "how long a replica tries to renew a shard Lease before it stops the shard's clusters (shorter than --fleet-lease-duration)")
	fs.DurationVar(&f.RetryPeriod, "fleet-retry-period", f.RetryPeriod, "how often Leases are renewed and tried")
}

// Validate checks the flags (with --fleet only); errors are usage errors.
func (f *FleetFlags) Validate() error {
	if !f.Enabled {
		return nil
	}
	if f.Shards < 1 {
		return usagef("--fleet-shards must be at least 1")
	}
	if f.Renew >= f.LeaseDuration || f.RetryPeriod <= 0 || f.RetryPeriod >= f.Renew {
		return usagef("--fleet-retry-period < --fleet-renew-deadline < --fleet-lease-duration is required")
	}
	return nil
}

// Options converts the flags to server.FleetOptions (nil without --fleet); without
// --fleet-namespace the Leases go to the namespace of kc's context. Errors are usage
// errors.
func (f *FleetFlags) Options(kc kube.ConfigOptions) (*server.FleetOptions, error) {
	if !f.Enabled {
		return nil, nil
	}
	ns := f.Namespace
	if ns == "" {
		var err error
		if ns, err = kube.ContextNamespace(kc); err != nil {
			return nil, err
		}
	}
	adv := f.Advertise
	if ip := os.Getenv("POD_IP"); adv == "" && ip != "" {
		_, port, err := net.SplitHostPort(f.Addr)
		if err != nil {
			return nil, usagef("--fleet-addr %q: %v", f.Addr, err)
		}
		adv = net.JoinHostPort(ip, port)
	}
	return &server.FleetOptions{Namespace: ns, Shards: f.Shards, Identity: f.Identity, Addr: f.Addr, Advertise: adv,
		LeaseDuration: f.LeaseDuration, RenewDeadline: f.Renew, RetryPeriod: f.RetryPeriod}, nil
}
