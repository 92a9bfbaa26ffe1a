package cli

import (
	"io"
	"log/slog"
	"time"

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

// The sections of ServeOptions. Each binds its flags (AddFlags), checks them (Validate;
// errors are usage errors) and converts them to its part of server.Options (apply).

// ListenerFlags are serve's listeners: the ways in, the ops listener, TLS, profiling.
type ListenerFlags struct {
	GRPCAddr, HTTPAddr      string
	MetricsAddr             string
	Pprof                   bool
	TLSCertFile, TLSKeyFile string
	ProfilingAddr           string
}

// DefaultListenerFlags returns the defaults.
func DefaultListenerFlags() ListenerFlags {
	return ListenerFlags{GRPCAddr: server.DefaultGRPCAddr, HTTPAddr: server.DefaultHTTPAddr, MetricsAddr: ops.DefaultAddr}
}

// AddFlags binds the flags.
func (f *ListenerFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.GRPCAddr, "grpc-addr", f.GRPCAddr, `Argo Events custom trigger (gRPC) listen address; "-" disables it`)
	fs.StringVar(&f.HTTPAddr, "http-addr", f.HTTPAddr, `HTTP receiver (CloudEvents, JSON) listen address; "-" disables it (it also serves /healthz, /readyz, /metrics until 0.5.0: use --metrics-addr)`)
	fs.StringVar(&f.MetricsAddr, "metrics-addr", f.MetricsAddr, `ops listener (/metrics, /healthz, /readyz, with --pprof /debug/pprof/) listen address; "-" turns it off`)
	fs.BoolVar(&f.Pprof, "pprof", f.Pprof, "serve Go's runtime profiles (/debug/pprof/) on the ops listener, behind the bearer token (needs --http-token-file)")
	fs.StringVar(&f.TLSCertFile, "tls-cert-file", f.TLSCertFile, "PEM certificate: serve TLS on both servers (with --tls-key-file)")
	fs.StringVar(&f.TLSKeyFile, "tls-key-file", f.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.StringVar(&f.ProfilingAddr, "profiling-addr", f.ProfilingAddr, `serve Go's runtime profiles (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060 (default: off)`)
}

// Validate checks the flags (--pprof's need of the token is ServeOptions.Validate's).
func (f *ListenerFlags) Validate() error {
	switch {
	case f.GRPCAddr == "-" && f.HTTPAddr == "-":
		return usagef("--grpc-addr and --http-addr are both disabled: nothing to serve")
	case (f.TLSCertFile == "") != (f.TLSKeyFile == ""):
		return usagef("--tls-cert-file and --tls-key-file go together")
	}
	if f.ProfilingAddr != "" {
		if err := server.ValidProfilingAddr(f.ProfilingAddr); err != nil {
			return usagef("--profiling-addr: %v", err)
		}
	}
	return nil
}

func (f *ListenerFlags) apply(so *server.Options) {
	so.GRPCAddr, so.HTTPAddr, so.MetricsAddr, so.Pprof = f.GRPCAddr, f.HTTPAddr, f.MetricsAddr, f.Pprof
	so.TLSCertFile, so.TLSKeyFile, so.ProfilingAddr = f.TLSCertFile, f.TLSKeyFile, f.ProfilingAddr
}

// ClusterSourceFlags select the served cluster(s) (package cluster): the kubeconfig,
// --cluster (repeated), --all-contexts, --argocd-clusters, the default cluster, the
// client's rate limits and the health probe.
type ClusterSourceFlags struct {
	Kubeconfig, Context string
	InCluster           bool
	ClusterName         string
	// Namespace is --watch-namespace: the caches' scope.
	Namespace       string
	QPS             float32
	Burst           int
	Clusters        []string
	AllContexts     bool
	ArgoCDNamespace string
	DefaultCluster  string
	ProbeInterval   time.Duration
}

// DefaultClusterSourceFlags returns the defaults.
func DefaultClusterSourceFlags() ClusterSourceFlags {
	return ClusterSourceFlags{ClusterName: dispatch.DefaultClusterName, ProbeInterval: cluster.DefaultProbeInterval}
}

// AddFlags binds the flags.
func (f *ClusterSourceFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Kubeconfig, "kubeconfig", f.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&f.Context, "context", f.Context, "kubeconfig context")
	fs.BoolVar(&f.InCluster, "in-cluster", f.InCluster, "use the pod's service account (default: when no kubeconfig is found)")
	fs.StringVar(&f.ClusterName, "cluster-name", f.ClusterName, "name of the served cluster, as events name it (EventSource metadata.cluster)")
	fs.StringVar(&f.Namespace, "watch-namespace", f.Namespace, "cache only this namespace (default: all namespaces)")
	fs.Float32Var(&f.QPS, "kube-api-qps", f.QPS, "client-side QPS limit to the apiserver (default 50)")
	fs.IntVar(&f.Burst, "kube-api-burst", f.Burst, "client-side burst to the apiserver (default 100)")
	fs.StringArrayVar(&f.Clusters, "cluster", f.Clusters, "serve this kubeconfig context as a cluster named after it (repeat for several; default: the one cluster of --kubeconfig/--context/--in-cluster, named --cluster-name)")
	fs.BoolVar(&f.AllContexts, "all-contexts", f.AllContexts, "serve every context of the kubeconfig, each a cluster named after it")
	fs.StringVar(&f.ArgoCDNamespace, "argocd-clusters", f.ArgoCDNamespace, "also serve the clusters of the Argo CD cluster Secrets in this namespace of the default cluster, watched live")
	fs.StringVar(&f.DefaultCluster, "default-cluster", f.DefaultCluster, "cluster for events that name none (default: the first --cluster, or --cluster-name)")
	fs.DurationVar(&f.ProbeInterval, "cluster-probe-interval", f.ProbeInterval, "how often each served cluster's apiserver /readyz is probed; while it fails serve is not ready and answers that cluster's events with retry-later")
}

// Validate checks the flags.
func (f *ClusterSourceFlags) Validate() error {
	if f.ProbeInterval <= 0 {
		return usagef("--cluster-probe-interval must be positive")
	}
	if err := f.sources().Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// sources returns the cluster selection of the flags.
func (f *ClusterSourceFlags) sources() cluster.Sources {
	return cluster.Sources{Kubeconfig: f.Kubeconfig, Context: f.Context, InCluster: f.InCluster, HomeName: f.ClusterName,
		Contexts: f.Clusters, AllContexts: f.AllContexts, ArgoCDNamespace: f.ArgoCDNamespace, QPS: f.QPS, Burst: f.Burst}
}

// configOptions select the kubeconfig context of the default cluster.
func (f *ClusterSourceFlags) configOptions() kube.ConfigOptions {
	return kube.ConfigOptions{Kubeconfig: f.Kubeconfig, Context: f.Context, InCluster: f.InCluster}
}

func (f *ClusterSourceFlags) apply(so *server.Options) {
	so.ClusterName, so.Namespace, so.ProbeInterval = f.ClusterName, f.Namespace, f.ProbeInterval
}

// connect reads the kubeconfig: several clusters become so.Clusters (logging to
// so.Logger), one cluster the rest.Config returned.
func (f *ClusterSourceFlags) connect(so *server.Options) (*rest.Config, error) {
	if src := f.sources(); src.Multi() {
		specs, err := src.Static()
		if err != nil {
			return nil, err
		}
		so.Clusters = &cluster.Options{Clusters: specs, Default: f.DefaultCluster, ArgoCDNamespace: f.ArgoCDNamespace, Logger: so.Logger}
		return nil, nil
	}
	kc := f.configOptions()
	kc.QPS, kc.Burst = f.QPS, f.Burst
	return kube.RESTConfig(kc)
}

// LimitFlags bound the events: how many at once, how long, how large, and the shutdown.
type LimitFlags struct {
	MaxInFlight     int
	ExecuteTimeout  time.Duration
	ReplicaSetWait  time.Duration
	ShutdownTimeout time.Duration
	MaxBodyBytes    int64
}

// DefaultLimitFlags returns the defaults.
func DefaultLimitFlags() LimitFlags {
	return LimitFlags{MaxInFlight: dispatch.DefaultMaxInFlight, ExecuteTimeout: dispatch.DefaultExecuteTimeout,
		ReplicaSetWait: cache.DefaultReplicaSetWait, ShutdownTimeout: 30 * time.Second, MaxBodyBytes: event.MaxPayloadBytes}
}

// AddFlags binds the flags.
func (f *LimitFlags) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&f.MaxInFlight, "max-in-flight", f.MaxInFlight, "events handled at once (one cluster of several: half of them); more get gRPC ResourceExhausted / HTTP 429")
	fs.DurationVar(&f.ExecuteTimeout, "execute-timeout", f.ExecuteTimeout, "time bound for one event (gRPC DeadlineExceeded / HTTP 503 beyond)")
	fs.DurationVar(&f.ReplicaSetWait, "replicaset-wait-timeout", f.ReplicaSetWait, "how long an event for a ReplicaSet the cache has not seen yet waits for the service's own watch to deliver it before reading it live (one GET saved; a name that never arrives is refused only after it; within --execute-timeout; 0: read live at once)")
	fs.DurationVar(&f.ShutdownTimeout, "shutdown-timeout", f.ShutdownTimeout, "how long shutdown waits for events in flight")
	fs.Int64Var(&f.MaxBodyBytes, "max-body-bytes", f.MaxBodyBytes, "largest HTTP request body (413 beyond)")
}

// Validate checks the flags.
func (f *LimitFlags) Validate() error {
	switch {
	case f.MaxInFlight < 1:
		return usagef("--max-in-flight must be at least 1")
	case f.ExecuteTimeout <= 0:
		return usagef("--execute-timeout must be positive")
	case f.ReplicaSetWait < 0:
		return usagef("--replicaset-wait-timeout must not be negative")
	case f.ShutdownTimeout <= 0:
		return usagef("--shutdown-timeout must be positive")
	case f.MaxBodyBytes < 1024:
		return usagef("--max-body-bytes must be at least 1024")
	}
	return nil
}

func (f *LimitFlags) apply(so *server.Options) {
	so.MaxInFlight, so.ExecuteTimeout, so.ShutdownTimeout, so.MaxBodyBytes = f.MaxInFlight, f.ExecuteTimeout, f.ShutdownTimeout, f.MaxBodyBytes
	// --replicaset-wait-timeout 0 (no wait) is negative in cache.Options.ReplicaSetWait.
	so.ReplicaSetWait = f.ReplicaSetWait
	if f.ReplicaSetWait == 0 {
		so.ReplicaSetWait = -1
	}
}

// WriteFlags are what the service may write: Secrets as revisions, blockOwnerDeletion.
type WriteFlags struct {
	AllowSecrets       bool
	BlockOwnerDeletion bool
}

// AddFlags binds the flags.
func (f *WriteFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.AllowSecrets, "allow-secrets", f.AllowSecrets, "let events with includeSecrets=true attach Secrets (caches Secret metadata; needs RBAC on secrets)")
	fs.BoolVar(&f.BlockOwnerDeletion, "block-owner-deletion", f.BlockOwnerDeletion, "set blockOwnerDeletion (needs delete rights on ReplicaSets/finalizers)")
}

func (f *WriteFlags) apply(so *server.Options) {
	so.AllowSecrets, so.BlockOwnerDeletion = f.AllowSecrets, f.BlockOwnerDeletion
}

// WatchFlags are the built-in ReplicaSet watcher's (server.Ingress.Watch...).
type WatchFlags struct {
	Enabled bool
	Resync  time.Duration
	Workers int
}

// DefaultWatchFlags returns the defaults.
func DefaultWatchFlags() WatchFlags {
	return WatchFlags{Resync: 10 * time.Minute, Workers: watch.DefaultWorkers}
}

// AddFlags binds the flags.
func (f *WatchFlags) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&f.Enabled, "watch", f.Enabled, "also watch ReplicaSets directly, in every served cluster (for clusters without Argo Events); level-triggered, with --watch-resync")
	fs.DurationVar(&f.Resync, "watch-resync", f.Resync, "with --watch: how often every ReplicaSet is checked again (repairs anything missed)")
	fs.IntVar(&f.Workers, "watch-workers", f.Workers, "with --watch: ReplicaSets handled at once per cluster")
}

// Validate checks the flags.
func (f *WatchFlags) Validate() error {
	if f.Resync <= 0 {
		return usagef("--watch-resync must be positive")
	}
	if f.Workers < 1 {
		return usagef("--watch-workers must be at least 1")
	}
	return nil
}

func (f *WatchFlags) apply(in *server.Ingress) {
	in.Watch, in.WatchResync, in.WatchWorkers = f.Enabled, f.Resync, f.Workers
}

// EventBusSection is the EventBus subscription (server.Ingress.EventBus): the
// connection (EventBusFlags, shared with eventsource) and the consumer.
type EventBusSection struct {
	Conn            EventBusFlags
	Stream, Durable string
	EventSourceName string
	EventName       string
	MaxInFlight     int
	AckWait         time.Duration
	MaxDeliver      int
}

// DefaultEventBusSection returns the defaults.
func DefaultEventBusSection() EventBusSection {
	return EventBusSection{Stream: eventbus.DefaultStream, Durable: eventbus.DefaultDurable, MaxInFlight: eventbus.DefaultMaxInFlight,
		AckWait: 30 * time.Second, MaxDeliver: eventbus.DefaultMaxDeliver}
}

// AddFlags binds the flags.
func (f *EventBusSection) AddFlags(fs *pflag.FlagSet) {
	f.Conn.AddFlags(fs)
	fs.StringVar(&f.Stream, "eventbus-stream", f.Stream, "EventBus JetStream stream (Argo Events: default)")
	fs.StringVar(&f.Durable, "eventbus-durable", f.Durable, "durable consumer shared by every replica (they split the events)")
	fs.StringVar(&f.EventSourceName, "eventbus-event-source", f.EventSourceName, "only events of this EventSource (subject default.<name>.*; default: any)")
	fs.StringVar(&f.EventName, "eventbus-event-name", f.EventName, "only events of this event name (default: any)")
	fs.IntVar(&f.MaxInFlight, "eventbus-max-in-flight", f.MaxInFlight, "EventBus messages handled at once")
	fs.DurationVar(&f.AckWait, "eventbus-ack-wait", f.AckWait, "how long JetStream waits for a message's ack before redelivering it, e.g. after a crash (set when the durable consumer is created; long work sends heartbeats)")
	fs.IntVar(&f.MaxDeliver, "eventbus-max-deliver", f.MaxDeliver, "deliveries of one EventBus message before a still-transient failure is given up (terminated, counted in configmap_attacher_events_given_up_total)")
}

// Validate checks the flags (the credential files are read by apply).
func (f *EventBusSection) Validate() error {
	if f.Conn.URL != "" {
		if err := f.Conn.Validate(); err != nil {
			return err
		}
	}
	if f.AckWait < time.Second {
		return usagef("--eventbus-ack-wait must be at least 1s")
	}
	if f.MaxDeliver < 1 {
		return usagef("--eventbus-max-deliver must be at least 1")
	}
	return nil
}

// apply reads the credential files and sets in.EventBus (nil without --eventbus-url).
func (f *EventBusSection) apply(in *server.Ingress) error {
	if f.Conn.URL == "" {
		return nil
	}
	conn, err := f.Conn.Conn()
	if err != nil {
		return err
	}
	in.EventBus = &eventbus.SubscriberOptions{URL: conn.URL, Auth: conn.Auth, TLS: conn.TLS, Stream: f.Stream,
		Durable: f.Durable, EventSourceName: f.EventSourceName, EventName: f.EventName, MaxInFlight: f.MaxInFlight,
		AckWait: f.AckWait, MaxDeliver: f.MaxDeliver}
	return nil
}

// SweepFlags are the orphan sweep's (server.Ingress.GC), with its leader election.
type SweepFlags struct {
	Interval       time.Duration
	MinAge         time.Duration
	Keep           int
	DryRun         string
	LeaderElect    bool
	LeaseNamespace string
}

// DefaultSweepFlags returns the defaults.
func DefaultSweepFlags() SweepFlags {
	return SweepFlags{MinAge: gc.DefaultMinAge, Keep: gc.DefaultKeep, DryRun: DryRunNone}
}

// AddFlags binds the flags.
func (f *SweepFlags) AddFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.Interval, "gc-interval", f.Interval, "run the orphan sweep of every served cluster this often (0: off; e.g. 10m)")
	fs.DurationVar(&f.MinAge, "gc-min-age", f.MinAge, "grace period: never collect a revision younger than this")
	fs.IntVar(&f.Keep, "gc-keep", f.Keep, "keep the newest N unreferenced revisions of each family (its ConfigMaps and its Secrets each)")
	fs.StringVar(&f.DryRun, "gc-dry-run", f.DryRun, `the sweep's dry run: "none" deletes, "client" logs what would go, "server" sends the deletes with dryRun=All; true and false are client and none`)
	fs.Lookup("gc-dry-run").NoOptDefVal = DryRunClient
	fs.BoolVar(&f.LeaderElect, "leader-elect", f.LeaderElect, "elect one sweeper among the replicas, per cluster, on a Lease in the default cluster (use with replicas > 1)")
	fs.StringVar(&f.LeaseNamespace, "leader-elect-namespace", f.LeaseNamespace, "namespace of the leader-election Leases (default: the pod's namespace)")
}

// Validate checks the flags: the one check of the sweep options on serve's path
// (server.New and gc.NewSweeper keep theirs as the packages' own contracts).
func (f *SweepFlags) Validate() error {
	if f.Interval < 0 {
		return usagef("--gc-interval must not be negative")
	}
	if err := f.options().Validate(); err != nil {
		return usageError{err}
	}
	dry := f.DryRun
	if err := validDryRun(&dry); err != nil {
		return usagef("--gc-dry-run %q: want none, client or server", f.DryRun)
	}
	return nil
}

func (f *SweepFlags) options() gc.Options { return gc.Options{MinAge: f.MinAge, Keep: f.Keep} }

// apply sets in.GC; with --leader-elect and no namespace, the Leases go to the
// namespace of kc's context.
func (f *SweepFlags) apply(in *server.Ingress, kc kube.ConfigOptions) error {
	dry := f.DryRun
	_ = validDryRun(&dry) // normalises true and false; checked by Validate
	in.GC = &server.GCOptions{Interval: f.Interval, Options: f.options(), DryRun: dry == DryRunClient, ServerDryRun: dry == DryRunServer}
	if f.Interval > 0 && f.LeaderElect {
		in.GC.LeaseNamespace = f.LeaseNamespace
		if in.GC.LeaseNamespace == "" {
			ns, err := kube.ContextNamespace(kc)
			if err != nil {
				return err
			}
			in.GC.LeaseNamespace = ns
		}
	}
	return nil
}

// LoggingFlags are serve's log level and format.
type LoggingFlags struct {
	Level, Format string
}

// DefaultLoggingFlags returns the defaults.
func DefaultLoggingFlags() LoggingFlags { return LoggingFlags{Level: "info", Format: "text"} }

// AddFlags binds the flags.
func (f *LoggingFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.Level, "log-level", f.Level, "log level: debug, info, warn, error")
	fs.StringVar(&f.Format, "log-format", f.Format, "log format: text or json")
}

// Validate checks the flags.
func (f *LoggingFlags) Validate() error {
	_, err := logHandlerOptions(f.Level, f.Format)
	return err
}

// Logger returns the logger the flags describe, writing to w.
func (f *LoggingFlags) Logger(w io.Writer) (*slog.Logger, error) {
	return NewLogger(w, f.Level, f.Format)
}
