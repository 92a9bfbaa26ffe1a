package cli

import (
	"context"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/watch"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/ops"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// ServeOptions are the flags of `configmap-attacher serve`.
type ServeOptions struct {
	GRPCAddr, HTTPAddr      string
	MetricsAddr             string
	Pprof                   bool
	Kubeconfig, Context     string
	InCluster               bool
	ClusterName             string
	Namespace               string
	TLSCertFile, TLSKeyFile string
	MaxInFlight             int
	ExecuteTimeout          time.Duration
	ReplicaSetWait          time.Duration
	ShutdownTimeout         time.Duration
	MaxBodyBytes            int64
	AllowSecrets            bool
	BlockOwnerDeletion      bool
	QPS                     float32
	Burst                   int
	LogLevel, LogFormat     string
	ProfilingAddr           string
	// Multi-cluster (package cluster): --cluster (repeated), --all-contexts,
	// --argocd-clusters, --default-cluster, --cluster-probe-interval.
	Clusters             []string
	AllContexts          bool
	ArgoCDNamespace      string
	DefaultCluster       string
	ClusterProbeInterval time.Duration
	// Other ingress paths and the periodic sweep (server.Ingress).
	Watch              bool
	WatchResync        time.Duration
	WatchWorkers       int
	EventBus           EventBusFlags
	EventBusStream     string
	EventBusDurable    string
	EventSourceName    string
	EventName          string
	EventBusInFlight   int
	EventBusAckWait    time.Duration
	EventBusMaxDeliver int
	GCInterval         time.Duration
	GCMinAge           time.Duration
	GCKeep             int
	GCDryRun           string
	LeaderElect        bool
	LeaseNamespace     string
	// Security (serve_security.go).
	Security SecurityFlags
	// Trust: what cluster Secrets may make serve do (serve_trust.go).
	Trust ClusterTrustFlags
	// Fleet (serve_fleet.go).
	Fleet FleetFlags
}

// DefaultServeOptions returns serve's defaults.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{GRPCAddr: server.DefaultGRPCAddr, HTTPAddr: server.DefaultHTTPAddr, MetricsAddr: ops.DefaultAddr,
		ClusterName: dispatch.DefaultClusterName, MaxInFlight: dispatch.DefaultMaxInFlight, GCDryRun: DryRunNone,
		ExecuteTimeout: dispatch.DefaultExecuteTimeout, ReplicaSetWait: cache.DefaultReplicaSetWait, ShutdownTimeout: 30 * time.Second,
		MaxBodyBytes: event.MaxPayloadBytes, LogLevel: "info", LogFormat: "text",
		ClusterProbeInterval: cluster.DefaultProbeInterval,
		WatchResync:          10 * time.Minute, WatchWorkers: watch.DefaultWorkers, EventBusStream: eventbus.DefaultStream, EventBusDurable: eventbus.DefaultDurable,
		EventBusInFlight: eventbus.DefaultMaxInFlight, EventBusAckWait: 30 * time.Second, EventBusMaxDeliver: eventbus.DefaultMaxDeliver, GCMinAge: gc.DefaultMinAge, GCKeep: gc.DefaultKeep,
		Trust: DefaultClusterTrustFlags(), Fleet: DefaultFleetFlags()}
}

// AddFlags binds the options to a flag set.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.GRPCAddr, "grpc-addr", o.GRPCAddr, `Argo Events custom trigger (gRPC) listen address; "-" disables it`)
	fs.StringVar(&o.HTTPAddr, "http-addr", o.HTTPAddr, `HTTP receiver (CloudEvents, JSON) listen address; "-" disables it (it also serves /healthz, /readyz, /metrics until 0.4.0: use --metrics-addr)`)
	fs.StringVar(&o.MetricsAddr, "metrics-addr", o.MetricsAddr, `ops listener (/metrics, /healthz, /readyz, with --pprof /debug/pprof/) listen address; "-" turns it off`)
	fs.BoolVar(&o.Pprof, "pprof", o.Pprof, "serve Go's runtime profiles (/debug/pprof/) on the ops listener, behind the bearer token (needs --http-token-file)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context")
	fs.BoolVar(&o.InCluster, "in-cluster", o.InCluster, "use the pod's service account (default: when no kubeconfig is found)")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "name of the served cluster, as events name it (EventSource metadata.cluster)")
	fs.StringVar(&o.Namespace, "watch-namespace", o.Namespace, "cache only this namespace (default: all namespaces)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM certificate: serve TLS on both servers (with --tls-key-file)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "events handled at once (one cluster of several: half of them); more get gRPC ResourceExhausted / HTTP 429")
	fs.DurationVar(&o.ExecuteTimeout, "execute-timeout", o.ExecuteTimeout, "time bound for one event (gRPC DeadlineExceeded / HTTP 503 beyond)")
	fs.DurationVar(&o.ReplicaSetWait, "replicaset-wait-timeout", o.ReplicaSetWait, "how long an event for a ReplicaSet the cache has not seen yet waits for the service's own watch to deliver it before reading it live (one GET saved; a name that never arrives is refused only after it; within --execute-timeout; 0: read live at once)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long shutdown waits for events in flight")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest HTTP request body (413 beyond)")
	fs.BoolVar(&o.AllowSecrets, "allow-secrets", o.AllowSecrets, "let events with includeSecrets=true attach Secrets (caches Secret metadata; needs RBAC on secrets)")
	fs.BoolVar(&o.BlockOwnerDeletion, "block-owner-deletion", o.BlockOwnerDeletion, "set blockOwnerDeletion (needs delete rights on ReplicaSets/finalizers)")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "client-side QPS limit to the apiserver (default 50)")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "client-side burst to the apiserver (default 100)")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	fs.StringVar(&o.ProfilingAddr, "profiling-addr", o.ProfilingAddr, `serve Go's runtime profiles (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060 (default: off)`)
	fs.StringArrayVar(&o.Clusters, "cluster", o.Clusters, "serve this kubeconfig context as a cluster named after it (repeat for several; default: the one cluster of --kubeconfig/--context/--in-cluster, named --cluster-name)")
	fs.BoolVar(&o.AllContexts, "all-contexts", o.AllContexts, "serve every context of the kubeconfig, each a cluster named after it")
	fs.StringVar(&o.ArgoCDNamespace, "argocd-clusters", o.ArgoCDNamespace, "also serve the clusters of the Argo CD cluster Secrets in this namespace of the default cluster, watched live")
	fs.StringVar(&o.DefaultCluster, "default-cluster", o.DefaultCluster, "cluster for events that name none (default: the first --cluster, or --cluster-name)")
	o.Trust.AddFlags(fs)
	fs.DurationVar(&o.ClusterProbeInterval, "cluster-probe-interval", o.ClusterProbeInterval, "how often each served cluster's apiserver /readyz is probed; while it fails serve is not ready and answers that cluster's events with retry-later")
	fs.BoolVar(&o.Watch, "watch", o.Watch, "also watch ReplicaSets directly, in every served cluster (for clusters without Argo Events); level-triggered, with --watch-resync")
	fs.DurationVar(&o.WatchResync, "watch-resync", o.WatchResync, "with --watch: how often every ReplicaSet is checked again (repairs anything missed)")
	fs.IntVar(&o.WatchWorkers, "watch-workers", o.WatchWorkers, "with --watch: ReplicaSets handled at once per cluster")
	o.EventBus.AddFlags(fs)
	fs.StringVar(&o.EventBusStream, "eventbus-stream", o.EventBusStream, "EventBus JetStream stream (Argo Events: default)")
	fs.StringVar(&o.EventBusDurable, "eventbus-durable", o.EventBusDurable, "durable consumer shared by every replica (they split the events)")
	fs.StringVar(&o.EventSourceName, "eventbus-event-source", o.EventSourceName, "only events of this EventSource (subject default.<name>.*; default: any)")
	fs.StringVar(&o.EventName, "eventbus-event-name", o.EventName, "only events of this event name (default: any)")
	fs.IntVar(&o.EventBusInFlight, "eventbus-max-in-flight", o.EventBusInFlight, "EventBus messages handled at once")
	fs.DurationVar(&o.EventBusAckWait, "eventbus-ack-wait", o.EventBusAckWait, "how long JetStream waits for a message's ack before redelivering it, e.g. after a crash (set when the durable consumer is created; long work sends heartbeats)")
	fs.IntVar(&o.EventBusMaxDeliver, "eventbus-max-deliver", o.EventBusMaxDeliver, "deliveries of one EventBus message before a still-transient failure is given up (terminated, counted in configmap_attacher_events_given_up_total)")
	fs.DurationVar(&o.GCInterval, "gc-interval", o.GCInterval, "run the orphan sweep of every served cluster this often (0: off; e.g. 10m)")
	fs.DurationVar(&o.GCMinAge, "gc-min-age", o.GCMinAge, "grace period: never collect a revision younger than this")
	fs.IntVar(&o.GCKeep, "gc-keep", o.GCKeep, "keep the newest N unreferenced revisions of each family (its ConfigMaps and its Secrets each)")
	fs.StringVar(&o.GCDryRun, "gc-dry-run", o.GCDryRun, `the sweep's dry run: "none" deletes, "client" logs what would go, "server" sends the deletes with dryRun=All; true and false are client and none`)
	fs.Lookup("gc-dry-run").NoOptDefVal = DryRunClient
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect one sweeper among the replicas, per cluster, on a Lease in the default cluster (use with replicas > 1)")
	fs.StringVar(&o.LeaseNamespace, "leader-elect-namespace", o.LeaseNamespace, "namespace of the leader-election Leases (default: the pod's namespace)")
	o.Security.AddFlags(fs)
	o.Fleet.AddFlags(fs)
}

// Ingress converts the ingress and sweep flags to server.Ingress. Errors are usage errors.
func (o *ServeOptions) Ingress() (server.Ingress, error) {
	var in server.Ingress
	if o.WatchResync <= 0 {
		return in, usagef("--watch-resync must be positive")
	}
	if o.WatchWorkers < 1 {
		return in, usagef("--watch-workers must be at least 1")
	}
	in.Watch, in.WatchResync, in.WatchWorkers = o.Watch, o.WatchResync, o.WatchWorkers
	if o.EventBus.URL != "" {
		conn, err := o.EventBus.Conn()
		if err != nil {
			return in, err
		}
		in.EventBus = &eventbus.SubscriberOptions{URL: conn.URL, Auth: conn.Auth, TLS: conn.TLS, Stream: o.EventBusStream,
			Durable: o.EventBusDurable, EventSourceName: o.EventSourceName, EventName: o.EventName, MaxInFlight: o.EventBusInFlight,
			AckWait: o.EventBusAckWait, MaxDeliver: o.EventBusMaxDeliver}
	}
	if o.EventBusAckWait < time.Second {
		return in, usagef("--eventbus-ack-wait must be at least 1s")
	}
	if o.EventBusMaxDeliver < 1 {
		return in, usagef("--eventbus-max-deliver must be at least 1")
	}
	if o.GCInterval < 0 {
		return in, usagef("--gc-interval must not be negative")
	}
	opts := gc.Options{MinAge: o.GCMinAge, Keep: o.GCKeep}
	if err := opts.Validate(); err != nil {
		return in, usageError{err}
	}
	dry := o.GCDryRun
	if err := validDryRun(&dry); err != nil {
		return in, usagef("--gc-dry-run %q: want none, client or server", o.GCDryRun)
	}
	in.GC = &server.GCOptions{Interval: o.GCInterval, Options: opts, DryRun: dry == DryRunClient, ServerDryRun: dry == DryRunServer}
	if o.GCInterval > 0 && o.LeaderElect {
		in.GC.LeaseNamespace = o.LeaseNamespace
		if in.GC.LeaseNamespace == "" {
			ns, err := kube.ContextNamespace(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster})
			if err != nil {
				return in, err
			}
			in.GC.LeaseNamespace = ns
		}
	}
	return in, nil
}

// sources returns the cluster selection of the flags.
func (o *ServeOptions) sources() cluster.Sources {
	return cluster.Sources{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster, HomeName: o.ClusterName,
		Contexts: o.Clusters, AllContexts: o.AllContexts, ArgoCDNamespace: o.ArgoCDNamespace, QPS: o.QPS, Burst: o.Burst}
}

// Validate checks the options; errors are usage errors.
func (o *ServeOptions) Validate() error {
	switch {
	case o.GRPCAddr == "-" && o.HTTPAddr == "-":
		return usagef("--grpc-addr and --http-addr are both disabled: nothing to serve")
	case o.Pprof && (o.MetricsAddr == "-" || o.Security.HTTPTokenFile == ""):
		return usagef("--pprof needs the ops listener (--metrics-addr) and the bearer token (--http-token-file); without a token use --profiling-addr, a loopback listener")
	case (o.TLSCertFile == "") != (o.TLSKeyFile == ""):
		return usagef("--tls-cert-file and --tls-key-file go together")
	case o.MaxInFlight < 1:
		return usagef("--max-in-flight must be at least 1")
	case o.ExecuteTimeout <= 0:
		return usagef("--execute-timeout must be positive")
	case o.ReplicaSetWait < 0:
		return usagef("--replicaset-wait-timeout must not be negative")
	case o.ShutdownTimeout <= 0:
		return usagef("--shutdown-timeout must be positive")
	case o.MaxBodyBytes < 1024:
		return usagef("--max-body-bytes must be at least 1024")
	case o.ClusterProbeInterval <= 0:
		return usagef("--cluster-probe-interval must be positive")
	}
	if err := o.sources().Validate(); err != nil {
		return usageError{err}
	}
	if _, err := o.Trust.validate(); err != nil {
		return err
	}
	if o.ProfilingAddr != "" {
		if err := server.ValidProfilingAddr(o.ProfilingAddr); err != nil {
			return usagef("--profiling-addr: %v", err)
		}
	}
	return o.Security.Validate(o.TLSCertFile != "")
}

// ServerOptions converts the flags to server.Options (without the logger).
func (o *ServeOptions) ServerOptions() server.Options {
	return server.Options{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, MetricsAddr: o.MetricsAddr, Pprof: o.Pprof, TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSKeyFile,
		ClusterName: o.ClusterName, Namespace: o.Namespace, MaxInFlight: o.MaxInFlight, ExecuteTimeout: o.ExecuteTimeout,
		MaxBodyBytes: o.MaxBodyBytes, ShutdownTimeout: o.ShutdownTimeout, AllowSecrets: o.AllowSecrets,
		BlockOwnerDeletion: o.BlockOwnerDeletion, ProbeInterval: o.ClusterProbeInterval, ReplicaSetWait: o.replicaSetWait(),
		ProfilingAddr: o.ProfilingAddr, ExecTimeout: o.Trust.ExecTimeout}
}

// replicaSetWait is --replicaset-wait-timeout as cache.Options.ReplicaSetWait takes it
// (0, no wait, is negative there).
func (o *ServeOptions) replicaSetWait() time.Duration {
	if o.ReplicaSetWait == 0 {
		return -1
	}
	return o.ReplicaSetWait
}

// Run serves until ctx ends (SIGINT/SIGTERM), then shuts down gracefully.
func (o *ServeOptions) Run(ctx context.Context, s *Streams) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log, err := NewLogger(s.Err, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	if limit, err := applyMemoryLimit(os.Getenv); err != nil {
		return err
	} else if limit > 0 {
		log.Info("Go soft memory limit set from the container's", "bytes", limit, "share", memoryLimitShare)
	}
	in, err := o.Ingress()
	if err != nil {
		return err
	}
	so := o.ServerOptions()
	so.Logger = log
	if err := o.Security.Apply(&so); err != nil {
		return err
	}
	so.Ingress = in
	if so.Fleet, err = o.Fleet.Options(o); err != nil {
		return err
	}
	var cfg *rest.Config
	if src := o.sources(); src.Multi() {
		specs, err := src.Static()
		if err != nil {
			return err
		}
		so.Clusters = &cluster.Options{Clusters: specs, Default: o.DefaultCluster, ArgoCDNamespace: o.ArgoCDNamespace, Logger: log}
		if err := o.Trust.apply(so.Clusters); err != nil {
			return err
		}
	} else if cfg, err = kube.RESTConfig(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster,
		QPS: o.QPS, Burst: o.Burst}); err != nil {
		return err
	}
	srv, err := server.New(cfg, so)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

func newServeCommand(s *Streams) *cobra.Command {
	o := DefaultServeOptions()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the event-driven service: Argo Events custom trigger (gRPC) and CloudEvents HTTP receiver",
		Long: `serve attaches config revisions to every new ReplicaSet it is told about:

  gRPC  (--grpc-addr, default :9000)  Argo Events' custom trigger protocol (Sensor "custom" trigger)
  HTTP  (--http-addr, default :8080)  POST / with a CloudEvent (binary or structured) or plain JSON
                                      (Argo Events' HTTP trigger); trigger spec keys as query parameters
                                      or X-Configmap-Attacher-<Key> headers
  ops   (--metrics-addr, default :8081) /metrics, /healthz, /readyz (and /debug/pprof/ with --pprof)

  --watch                             watch ReplicaSets directly (no Argo Events needed)
  --eventbus-url                      subscribe to the Argo Events EventBus (JetStream) directly
  --gc-interval                       sweep orphaned revisions periodically (--leader-elect with replicas)

Reads come from shared informers (ConfigMaps and Secrets metadata-only). SIGINT/SIGTERM
stops taking events and finishes those in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Security.ExcludeSet = cmd.Flags().Changed("exclude-namespaces")
			return o.Run(cmd.Context(), s)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
