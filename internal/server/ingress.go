package server

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
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

// runtimeOptions are every cluster's runtime options, from the server's: the caches'
// scope, the Attacher's settings, the watchers (feeding the dispatcher) and the
// sweeper. With leader election the periodic sweeps of each cluster are elected on a
// Lease in the default cluster (LeaseName), through a client of their own.
func (s *Server) runtimeOptions(ro cluster.Options, metrics *dispatch.Metrics) (cluster.RuntimeOptions, error) {
	o, in := s.opts, s.opts.Ingress
	gcm, err := gc.NewMetrics(metrics.Registry)
	if err != nil {
		return cluster.RuntimeOptions{}, fmt.Errorf("gc metrics: %w", err)
	}
	rto := cluster.RuntimeOptions{Namespace: o.Namespace, AllowSecrets: o.AllowSecrets, BlockOwnerDeletion: o.BlockOwnerDeletion,
		Namespaces: o.Namespaces, ReplicaSetWait: o.ReplicaSetWait, Dispatcher: s.d, Logger: s.log,
		Watch: cluster.WatchOptions{ReplicaSets: in.Watch, Resync: in.WatchResync, Workers: in.WatchWorkers,
			StopGrace: o.ShutdownTimeout},
		GC: &cluster.SweepOptions{Interval: in.GC.Interval, Options: in.GC.Options, DryRun: in.GC.DryRun,
			ServerDryRun: in.GC.ServerDryRun, Metrics: gcm}}
	if in.GC.LeaseNamespace != "" && o.Fleet == nil { // in a fleet, the owner alone sweeps
		if rto.GC.Lease, err = sweepLeases(ro, in.GC.LeaseNamespace); err != nil {
			return cluster.RuntimeOptions{}, err
		}
	}
	return rto, nil
}

// sweepLeases returns, for each cluster of ro, the Lease its periodic sweeps are
// elected on: in namespace ns of the default cluster, named LeaseName, written through
// a client of its own (its own rate limiter: an attach never waits behind a renewal).
func sweepLeases(ro cluster.Options, ns string) (func(name string) *gc.LeaderElection, error) {
	if len(ro.Clusters) == 0 {
		return nil, errors.New("server: no cluster to serve")
	}
	def := defaultSpec(ro)
	cl, err := kube.NewClients(def.Config)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return func(name string) *gc.LeaderElection {
		return &gc.LeaderElection{Client: cl.Kube, Namespace: ns, Name: LeaseName(name, name == def.Name)}
	}, nil
}

// defaultSpec is the default cluster of ro: the one named Default, else the first.
func defaultSpec(ro cluster.Options) cluster.Spec {
	for _, sp := range ro.Clusters {
		if sp.Name == ro.Default {
			return sp
		}
	}
	return ro.Clusters[0]
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
		// The subscription still takes the options of its events itself; they are the
		// dispatcher's defaults, the one copy.
		defaults := s.d.Defaults()
		o.Options = &defaults
	}
	return eventbus.NewSubscriber(o, s.d)
}
