package cli

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// ServeOptions are the flags of `configmap-attacher serve`, in sections (serve_sections.go,
// serve_security.go, serve_trust.go, serve_fleet.go): each section binds its flags, checks
// them in Validate and converts them to its part of server.Options.
type ServeOptions struct {
	Listeners ListenerFlags
	Cluster   ClusterSourceFlags
	Limits    LimitFlags
	Writes    WriteFlags
	Watch     WatchFlags
	EventBus  EventBusSection
	GC        SweepFlags
	Security  SecurityFlags
	// Trust: what cluster Secrets may make serve do.
	Trust   ClusterTrustFlags
	Fleet   FleetFlags
	Logging LoggingFlags
}

// DefaultServeOptions returns serve's defaults.
func DefaultServeOptions() ServeOptions {
	return ServeOptions{Listeners: DefaultListenerFlags(), Cluster: DefaultClusterSourceFlags(), Limits: DefaultLimitFlags(),
		Watch: DefaultWatchFlags(), EventBus: DefaultEventBusSection(), GC: DefaultSweepFlags(),
		Trust: DefaultClusterTrustFlags(), Fleet: DefaultFleetFlags(), Logging: DefaultLoggingFlags()}
}

// AddFlags binds the options to a flag set.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	o.Listeners.AddFlags(fs)
	o.Cluster.AddFlags(fs)
	o.Limits.AddFlags(fs)
	o.Writes.AddFlags(fs)
	o.Logging.AddFlags(fs)
	o.Trust.AddFlags(fs)
	o.Watch.AddFlags(fs)
	o.EventBus.AddFlags(fs)
	o.GC.AddFlags(fs)
	o.Security.AddFlags(fs)
	o.Fleet.AddFlags(fs)
}

// Validate checks every section, once; errors are usage errors. The conversions
// (ServerOptions, Run) then only read files and the kubeconfig.
func (o *ServeOptions) Validate() error {
	if err := o.Listeners.Validate(); err != nil {
		return err
	}
	if o.Listeners.Pprof && (o.Listeners.MetricsAddr == "-" || o.Security.HTTPTokenFile == "") {
		return usagef("--pprof needs the ops listener (--metrics-addr) and the bearer token (--http-token-file); without a token use --profiling-addr, a loopback listener")
	}
	for _, v := range []interface{ Validate() error }{&o.Limits, &o.Cluster, &o.Trust, &o.Logging, &o.Watch, &o.EventBus, &o.GC, &o.Fleet} {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	return o.Security.Validate(o.Listeners.TLSCertFile != "")
}

// ServerOptions converts the flags that need no file or kubeconfig to server.Options
// (without the logger, the security files, the ways in, the fleet and the clusters).
func (o *ServeOptions) ServerOptions() server.Options {
	var so server.Options
	o.Listeners.apply(&so)
	o.Cluster.apply(&so)
	o.Limits.apply(&so)
	o.Writes.apply(&so)
	o.Trust.applyServer(&so)
	return so
}

// Run serves until ctx ends (SIGINT/SIGTERM), then shuts down gracefully.
func (o *ServeOptions) Run(ctx context.Context, s *Streams) error {
	if err := o.Validate(); err != nil {
		return err
	}
	log, err := o.Logging.Logger(s.Err)
	if err != nil {
		return err
	}
	if limit, err := applyMemoryLimit(os.Getenv); err != nil {
		return err
	} else if limit > 0 {
		log.Info("Go soft memory limit set from the container's", "bytes", limit, "share", memoryLimitShare)
	}
	so := o.ServerOptions()
	so.Logger = log
	cfg, err := o.complete(&so)
	if err != nil {
		return err
	}
	srv, err := server.New(cfg, so)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}

// complete sets the options that read files, the environment or the kubeconfig: the
// ways in, the security files, the fleet and the clusters (a rest.Config for one
// cluster, so.Clusters for several).
func (o *ServeOptions) complete(so *server.Options) (*rest.Config, error) {
	kc := o.Cluster.configOptions()
	o.Watch.apply(&so.Ingress)
	if err := o.EventBus.apply(&so.Ingress); err != nil {
		return nil, err
	}
	if err := o.GC.apply(&so.Ingress, kc); err != nil {
		return nil, err
	}
	if err := o.Security.Apply(so); err != nil {
		return nil, err
	}
	var err error
	if so.Fleet, err = o.Fleet.Options(kc); err != nil {
		return nil, err
	}
	cfg, err := o.Cluster.connect(so)
	if err != nil {
		return nil, err
	}
	if so.Clusters != nil {
		if err := o.Trust.apply(so.Clusters); err != nil {
			return nil, err
		}
	}
	return cfg, nil
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
