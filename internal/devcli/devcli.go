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
	"strings"

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
kube-controller-manager with its garbage collector, kube-scheduler, kwok with one fake
Node on which Pods turn Running and Ready, and the Argo Rollouts controller, all built by
make tools into ./bin), an embedded NATS JetStream server as the EventBus, and the service
with every ingress path live: the gRPC custom trigger, the HTTP receiver, the EventBus
subscription (fed with ReplicaSet ADD events in the Argo Events format) and the built-in
watcher. Ctrl-C stops everything and removes the temporary files.`,
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
	self := selfPath()
	// The plugin is built next to this binary (make tools); keep self's "./" prefix.
	plugin := strings.TrimSuffix(self, filepath.Base(self)) + "kubectl-argo-rollouts"
	example := filepath.Join(env.CP.Dir(), "app-rollout.yaml")
	if err := os.WriteFile(example, []byte(exampleRollout), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(s.Out, tryIt, env.CP.Kubeconfig(), env.Server.GRPCAddr(), env.Server.HTTPAddr(), env.NATS.ClientURL(),
		devenv.EventSourceName, devenv.EventName, env.NATS.CAFile(),
		env.CP.Kubeconfig(), self, plugin, plugin, plugin, plugin, self,
		example, plugin, self, self, plugin, plugin, env.Server.HTTPAddr())
	err = env.Run(ctx)
	fmt.Fprintln(s.Err, "stopped; temporary files removed")
	return err
}

// selfPath is this binary's path, relative to the working directory when shorter
// (./bin/configmap-attacher under make run).
func selfPath() string {
	self, _ := os.Executable()
	if self == "" {
		return "configmap-attacher"
	}
	wd, _ := os.Getwd()
	if rel, err := filepath.Rel(wd, self); err == nil && len(rel) < len(self) {
		return "./" + rel
	}
	return self
}

// tryIt is what `make run` prints once everything is up.
const tryIt = `
configmap-attacher is running on the embedded default: a local control plane with the real
Argo Rollouts controller, kube-scheduler and kwok (one fake Node: Pods turn Running and Ready).

  kubeconfig   %s
  gRPC trigger %s   (Argo Events custom trigger: serverURL)
  HTTP         http://%s   (POST / CloudEvents; /healthz /readyz /metrics)
  EventBus     %s   (JetStream stream "default", subject default.%s.%s; TLS CA %s)

Try it from another terminal:
  export KUBECONFIG=%s
  %s demo --kubeconfig $KUBECONFIG --namespace try-1   # the whole canary as a timeline; leaves Rollout web
  %s -n try-1 get rollout web      # revision 4's canary aborted, revision 2 stable, 3 kept in history
  %s -n try-1 retry rollout web    # the canary of revision 4 again: it pauses at 25%%
  %s -n try-1 promote web          # revision 4 stable; revisionHistoryLimit 1: the oldest ReplicaSet goes, and the GC its ConfigMap
  %s -n try-1 undo web             # back to revision 3: its ReplicaSet is reused and finds web-config-3 (promote again)
  %s status -n try-1               # every workload's revisions and their owners

A canary of your own, and the old Job's exact form (a ConfigMap without the opt-in label):
  kubectl create namespace try-2
  kubectl -n try-2 create configmap app-config-1 --from-literal=color=blue
  kubectl -n try-2 apply -f %s   # Rollout app on app-config-1
  %s -n try-2 get rollout app --watch   # Ctrl-C once Healthy
  %s -rollout app -namespace try-2 -configmaps app-config-1
  kubectl -n try-2 create configmap app-config-2 --from-literal=color=green
  kubectl -n try-2 patch rollout app --type=json -p '[{"op":"replace","path":"/spec/template/spec/volumes/0/configMap/name","value":"app-config-2"}]'
  %s -rollout app -namespace try-2 -configmaps app-config-2   # waits for the canary's ReplicaSet, attaches to it alone
  %s -n try-2 abort app            # the stable ReplicaSet keeps app-config-1
  %s -n try-2 get rollout app
  curl -s http://%s/readyz; echo

Ctrl-C stops everything.
`

// exampleRollout is the Rollout the "Try it" block applies: 4 replicas, canary 25% then
// a pause, on app-config-1.
const exampleRollout = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: app
spec:
  replicas: 4
  revisionHistoryLimit: 2
  selector:
    matchLabels: {app: app}
  strategy:
    canary:
      steps:
        - setWeight: 25
        - pause: {}
  template:
    metadata:
      labels: {app: app}
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: nginx:1.27
          volumeMounts: [{name: config, mountPath: /etc/app}]
      volumes:
        - name: config
          configMap: {name: app-config-1}
`

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
		Long: `demo plays a canary on the real Argo Rollouts controller: revision 1 stable; revision 2
a canary paused at 25%; a Pod of the stable ReplicaSet deleted (a spot replacement) and its
replacement Ready with revision 1's ConfigMap there; promote; revision 3, so that
revisionHistoryLimit deletes the first ReplicaSet and the garbage collector revision 1;
undo to revision 2 (its ReplicaSet is reused and finds its config); a canary of revision 4
aborted (the stable keeps its config). Each step is checked; it exits non-zero at the
first that does not hold.

Without --kubeconfig it runs on the embedded default (as make run does); with it, it plays
against a cluster where the service and the Argo Rollouts controller already run.`,
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
