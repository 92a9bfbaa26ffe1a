package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

func init() { register(newServeCommand) }

// ServeOptions are the flags of `configmap-attacher serve`.
type ServeOptions struct {
	GRPCAddr, HTTPAddr      string
	Kubeconfig, Context     string
	InCluster               bool
	ClusterName             string
	Namespace               string
	TLSCertFile, TLSKeyFile string
	MaxInFlight             int
	ExecuteTimeout          time.Duration
	ShutdownTimeout         time.Duration
	MaxBodyBytes            int64
	AllowSecrets            bool
	BlockOwnerDeletion      bool
	QPS                     float32
	Burst                   int
	LogLevel, LogFormat     string
	// Multi-cluster (package cluster): --cluster (repeated), --all-contexts,
	// --argocd-clusters, --default-cluster, --cluster-probe-interval.
	Clusters             []string
	AllContexts          bool
	ArgoCDNamespace      string
	DefaultCluster       string
	ClusterProbeInterval time.Duration
}

// DefaultServeOptions returns serve's defaults.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{GRPCAddr: server.DefaultGRPCAddr, HTTPAddr: server.DefaultHTTPAddr,
		ClusterName: trigger.DefaultClusterName, MaxInFlight: trigger.DefaultMaxInFlight,
		ExecuteTimeout: trigger.DefaultExecuteTimeout, ShutdownTimeout: 30 * time.Second,
		MaxBodyBytes: eventsource.MaxPayloadBytes, LogLevel: "info", LogFormat: "text",
		ClusterProbeInterval: cluster.DefaultProbeInterval}
}

// AddFlags binds the options to a flag set.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.GRPCAddr, "grpc-addr", o.GRPCAddr, `Argo Events custom trigger (gRPC) listen address; "-" disables it`)
	fs.StringVar(&o.HTTPAddr, "http-addr", o.HTTPAddr, `HTTP receiver (CloudEvents, JSON, /healthz, /readyz, /metrics) listen address; "-" disables it`)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig file (default $KUBECONFIG or ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context")
	fs.BoolVar(&o.InCluster, "in-cluster", o.InCluster, "use the pod's service account (default: when no kubeconfig is found)")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "name of the served cluster, as events name it (EventSource metadata.cluster)")
	fs.StringVar(&o.Namespace, "watch-namespace", o.Namespace, "cache only this namespace (default: all namespaces)")
	fs.StringVar(&o.TLSCertFile, "tls-cert-file", o.TLSCertFile, "PEM certificate: serve TLS on both servers (with --tls-key-file)")
	fs.StringVar(&o.TLSKeyFile, "tls-key-file", o.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", o.MaxInFlight, "events handled at once; more get gRPC ResourceExhausted / HTTP 429")
	fs.DurationVar(&o.ExecuteTimeout, "execute-timeout", o.ExecuteTimeout, "time bound for one event (gRPC DeadlineExceeded / HTTP 503 beyond)")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long shutdown waits for events in flight")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest HTTP request body (413 beyond)")
	fs.BoolVar(&o.AllowSecrets, "allow-secrets", o.AllowSecrets, "let events with includeSecrets=true attach Secrets (caches Secret metadata; needs RBAC on secrets)")
	fs.BoolVar(&o.BlockOwnerDeletion, "block-owner-deletion", o.BlockOwnerDeletion, "set blockOwnerDeletion (needs delete rights on ReplicaSets/finalizers)")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "client-side QPS limit to the apiserver (default 50)")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "client-side burst to the apiserver (default 100)")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	fs.StringArrayVar(&o.Clusters, "cluster", o.Clusters, "serve this kubeconfig context as a cluster named after it (repeat for several; default: the one cluster of --kubeconfig/--context/--in-cluster, named --cluster-name)")
	fs.BoolVar(&o.AllContexts, "all-contexts", o.AllContexts, "serve every context of the kubeconfig, each a cluster named after it")
	fs.StringVar(&o.ArgoCDNamespace, "argocd-clusters", o.ArgoCDNamespace, "also serve the clusters of the Argo CD cluster Secrets in this namespace of the default cluster, watched live")
	fs.StringVar(&o.DefaultCluster, "default-cluster", o.DefaultCluster, "cluster for events that name none (default: the first --cluster, or --cluster-name)")
	fs.DurationVar(&o.ClusterProbeInterval, "cluster-probe-interval", o.ClusterProbeInterval, "how often each cluster's /readyz is probed (with several clusters)")
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
	case (o.TLSCertFile == "") != (o.TLSKeyFile == ""):
		return usagef("--tls-cert-file and --tls-key-file go together")
	case o.MaxInFlight < 1:
		return usagef("--max-in-flight must be at least 1")
	case o.ExecuteTimeout <= 0:
		return usagef("--execute-timeout must be positive")
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
	return nil
}

// ServerOptions converts the flags to server.Options (without the logger).
func (o *ServeOptions) ServerOptions() server.Options {
	return server.Options{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSKeyFile,
		ClusterName: o.ClusterName, Namespace: o.Namespace, MaxInFlight: o.MaxInFlight, ExecuteTimeout: o.ExecuteTimeout,
		MaxBodyBytes: o.MaxBodyBytes, ShutdownTimeout: o.ShutdownTimeout, AllowSecrets: o.AllowSecrets,
		BlockOwnerDeletion: o.BlockOwnerDeletion}
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
	so := o.ServerOptions()
	so.Logger = log
	if src := o.sources(); src.Multi() {
		specs, err := src.Static()
		if err != nil {
			return err
		}
		reg, err := cluster.New(cluster.Options{Clusters: specs, Default: o.DefaultCluster, ArgoCDNamespace: o.ArgoCDNamespace,
			Namespace: o.Namespace, AllowSecrets: o.AllowSecrets, BlockOwnerDeletion: o.BlockOwnerDeletion,
			ProbeInterval: o.ClusterProbeInterval, Logger: log})
		if err != nil {
			return err
		}
		so.Clusters = reg
		srv, err := server.New(nil, so)
		if err != nil {
			return err
		}
		return srv.Run(ctx)
	}
	cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster,
		QPS: o.QPS, Burst: o.Burst})
	if err != nil {
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
                                      or X-Configmap-Attacher-<Key> headers; /healthz, /readyz, /metrics

Reads come from shared informers (ConfigMaps and Secrets metadata-only). SIGINT/SIGTERM
stops taking events and finishes those in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.Run(cmd.Context(), s)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
