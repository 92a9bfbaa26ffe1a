// Package devcli adds the development harness's commands to the CLI: `dev` (make run:
// the service on the embedded default) and `demo` (make demo). Only the development
// binary (cmd/configmap-attacher-dev) links it, so the shipped binary carries no local
// control plane, no embedded NATS server and no Argo process runner.
package devcli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/demo"
	"github.com/configmap-attacher/configmap-attacher/internal/devenv"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

func init() {
	cli.Register(newDevCommand)
	cli.Register(newDemoCommand)
}

// DevOptions are the flags of `configmap-attacher dev` (make run).
type DevOptions struct {
	GRPCAddr, HTTPAddr  string
	LogLevel, LogFormat string
}

func newDevCommand(s *cli.Streams) *cobra.Command {
	o := DevOptions{GRPCAddr: "127.0.0.1:9000", HTTPAddr: "127.0.0.1:8080", LogLevel: "info", LogFormat: "text"}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the service on the embedded default: a local control plane, NATS JetStream and every ingress path (make run)",
		Long: `dev starts a real local Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager with its garbage collector, built by make tools into ./bin), an
embedded NATS JetStream server as the EventBus, and the service with every ingress path
live: the gRPC custom trigger, the HTTP receiver, the EventBus subscription (fed with
ReplicaSet ADD events in the Argo Events format) and the built-in watcher. Ctrl-C stops
everything and removes the temporary files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.GRPCAddr, "grpc-addr", o.GRPCAddr, "gRPC custom trigger listen address")
	fs.StringVar(&o.HTTPAddr, "http-addr", o.HTTPAddr, "HTTP receiver listen address")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	return cmd
}

// Run starts the embedded default and serves until ctx ends.
func (o *DevOptions) Run(ctx context.Context, s *cli.Streams) error {
	log, err := cli.NewLogger(s.Err, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	progress := func(f string, a ...any) { fmt.Fprintf(s.Err, f+"\n", a...) }
	env, err := devenv.Start(ctx, devenv.Options{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, Logger: log, Progress: progress})
	if err != nil {
		return err
	}
	self, _ := os.Executable()
	if self == "" {
		self = "configmap-attacher"
	} else if rel, err := filepath.Rel(mustGetwd(), self); err == nil && len(rel) < len(self) {
		self = "./" + rel
	}
	fmt.Fprintf(s.Out, `
configmap-attacher is running on the embedded default.

  kubeconfig   %s
  gRPC trigger %s   (Argo Events custom trigger: serverURL)
  HTTP         http://%s   (POST / CloudEvents; /healthz /readyz /metrics)
  EventBus     %s   (JetStream stream "default", subject default.%s.%s; TLS CA %s)

Try it from another terminal:
  export KUBECONFIG=%s
  %s demo --kubeconfig $KUBECONFIG --namespace try-1   # a canary against this service, as a timeline
  %s status -A                                          # every workload's revisions
  curl -s http://%s/readyz; echo

Ctrl-C stops everything.
`, env.CP.Kubeconfig(), env.Server.GRPCAddr(), env.Server.HTTPAddr(), env.NATS.ClientURL(), devenv.EventSourceName, devenv.EventName,
		env.NATS.CAFile(), env.CP.Kubeconfig(), self, self, env.Server.HTTPAddr())
	err = env.Run(ctx)
	fmt.Fprintln(s.Err, "stopped; temporary files removed")
	return err
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

// DemoOptions are the flags of `configmap-attacher demo` (make demo).
type DemoOptions struct {
	Kubeconfig, Context string
	Namespace           string
	LogLevel            string
}

func newDemoCommand(s *cli.Streams) *cobra.Command {
	o := DemoOptions{Namespace: "demo", LogLevel: "warn"}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Play a scripted canary and print its timeline (make demo); exit 0 only if every step held",
		Long: `demo plays a canary: a Rollout with config revision 1; revision 2 arrives and a new
ReplicaSet appears; a pod of the old ReplicaSet is replaced and still finds revision 1;
the old ReplicaSet is removed and the real garbage collector deletes revision 1.

Without --kubeconfig it runs on the embedded default (as make run does); with it, it plays
against a cluster where the service already runs.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "play against this cluster (the service must be running there)")
	fs.StringVar(&o.Context, "context", o.Context, "kubeconfig context")
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "namespace to create and play in")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "the embedded service's log level")
	return cmd
}

// Run plays the demo.
func (o *DemoOptions) Run(ctx context.Context, s *cli.Streams) error {
	if o.Kubeconfig != "" || o.Context != "" {
		cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context})
		if err != nil {
			return err
		}
		return playDemo(ctx, cfg, s, o.Namespace)
	}
	log, err := cli.NewLogger(s.Err, o.LogLevel, "text")
	if err != nil {
		return err
	}
	progress := func(f string, a ...any) { fmt.Fprintf(s.Err, f+"\n", a...) }
	env, err := devenv.Start(ctx, devenv.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: log, Progress: progress})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- env.Run(runCtx) }()
	playErr := playDemo(ctx, env.CP.RESTConfig(), s, o.Namespace)
	cancel()
	if err := <-done; err != nil && playErr == nil {
		playErr = err
	}
	return playErr
}

func playDemo(ctx context.Context, cfg *rest.Config, s *cli.Streams, ns string) error {
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return err
	}
	return demo.Run(ctx, clients.Kube, clients.Dynamic, s.Out, demo.Options{Namespace: ns})
}
