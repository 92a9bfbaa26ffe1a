// Package devcli holds the development harness's commands, which
// cmd/configmap-attacher-dev adds to the CLI (Commands): `dev` (make run: the service on
// the embedded default) and `demo` (make demo). Only the development
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
	"github.com/configmap-attacher/configmap-attacher/internal/dev/demo"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/devenv"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Commands are the development binary's commands beyond the shipped ones, for cli.Main.
func Commands() []cli.Command { return []cli.Command{newDevCommand, newDemoCommand} }

// DevOptions are the flags of `configmap-attacher dev` (make run).
type DevOptions struct {
	GRPCAddr, HTTPAddr  string
	MetricsAddr         string // the ops listener: /healthz, /readyz, /metrics
	LogLevel, LogFormat string
	// WayIn is the way ReplicaSet events come in (devenv.Options.WayIn).
	WayIn string
}

func newDevCommand(s *cli.Streams) *cobra.Command {
	o := DevOptions{GRPCAddr: "127.0.0.1:9000", HTTPAddr: "127.0.0.1:8080", MetricsAddr: "127.0.0.1:8081", LogLevel: "info", LogFormat: "text", WayIn: devenv.WayInWatcher}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run the service on the embedded default: a local control plane, NATS JetStream and every ingress path (make run)",
		Long: `dev starts a real local Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager with its garbage collector, kube-scheduler, kwok with one fake
Node on which Pods turn Running and Ready, and the Argo Rollouts controller, all built by
make tools into ./bin), an embedded NATS JetStream server as the EventBus (fed with
ReplicaSet ADD events in the Argo Events format), and the service with the gRPC custom
trigger, the HTTP receiver, the ops listener (/healthz, /readyz, /metrics) and one way in for ReplicaSet events: the built-in watcher by
default, the EventBus subscription with --way-in eventbus, both with --way-in all (each
ReplicaSet is then handled twice). Ctrl-C stops everything and removes the temporary files.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.Run(cmd.Context(), s) },
	}
	fs := cmd.Flags()
	fs.StringVar(&o.GRPCAddr, "grpc-addr", o.GRPCAddr, "gRPC custom trigger listen address")
	fs.StringVar(&o.HTTPAddr, "http-addr", o.HTTPAddr, "HTTP receiver listen address")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", o.MetricsAddr, "ops listener (/healthz, /readyz, /metrics) listen address")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "log level: debug, info, warn, error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "log format: text or json")
	fs.StringVar(&o.WayIn, "way-in", o.WayIn, "the way ReplicaSet events come in: watcher, eventbus or all")
	return cmd
}

// Run starts the embedded default and serves until ctx ends.
func (o *DevOptions) Run(ctx context.Context, s *cli.Streams) error {
	log, err := cli.NewLogger(s.Err, o.LogLevel, o.LogFormat)
	if err != nil {
		return err
	}
	if err := devenv.ValidWayIn(o.WayIn); err != nil {
		return fmt.Errorf("--way-in: %w", err)
	}
	progress := func(f string, a ...any) { fmt.Fprintf(s.Err, f+"\n", a...) }
	env, err := devenv.Start(ctx, devenv.Options{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, MetricsAddr: o.MetricsAddr, Logger: log, Progress: progress, WayIn: o.WayIn})
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
	fmt.Fprint(s.Out, strings.NewReplacer("{kubeconfig}", env.CP.Kubeconfig(), "{grpc}", env.Server.GRPCAddr(),
		"{http}", env.Server.HTTPAddr(), "{ops}", env.Server.MetricsAddr(), "{nats}", env.NATS.ClientURL(), "{subject}", devenv.EventSourceName+"."+devenv.EventName,
		"{ca}", env.NATS.CAFile(), "{self}", self, "{plugin}", plugin, "{example}", example, "{wayin}", wayInText(o.WayIn)).Replace(tryIt))
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

func wayInText(w string) string {
	switch w {
	case devenv.WayInEventBus:
		return "the EventBus subscription (--way-in eventbus)"
	case devenv.WayInAll:
		return "the built-in watcher and the EventBus subscription (--way-in all: each ReplicaSet is handled twice)"
	}
	return "the built-in watcher (--way-in eventbus or all for the EventBus subscription)"
}

// tryIt is what `make run` prints once everything is up ({name} is replaced).
const tryIt = `
configmap-attacher is running on the embedded default: a local control plane with the real
Argo Rollouts controller, kube-scheduler and kwok (one fake Node: Pods turn Running and Ready).

  kubeconfig   {kubeconfig}
  way in       {wayin}
  gRPC trigger {grpc}   (Argo Events custom trigger: serverURL)
  HTTP         http://{http}   (POST / CloudEvents or a ReplicaSet)
  ops          http://{ops}   (/healthz /readyz /metrics)
  EventBus     {nats}   (JetStream stream "default", subject default.{subject}; TLS CA {ca})

Try it from another terminal ({self} and the Argo Rollouts plugin {plugin} are built here):
  export KUBECONFIG={kubeconfig}
  {self} demo --kubeconfig $KUBECONFIG --namespace try-1   # the whole canary as a timeline; leaves Rollout web
  {self} status -n try-1             # which ReplicaSet owns which web-config-N, health as the plugin shows it
  {plugin} -n try-1 get rollout web  # the plugin's view (its revision numbers count pod templates, not ConfigMaps)
  {plugin} -n try-1 retry rollout web   # the aborted canary (web-config-4) again: it pauses at 25%
  {plugin} -n try-1 promote web      # web-config-4 stable; revisionHistoryLimit 1: the oldest ReplicaSet goes, and the GC its ConfigMap
  {self} status -n try-1             # again: the ConfigMap of the deleted ReplicaSet is gone, nothing used is missing
  {self} gc -n try-1                 # the orphan sweep's plan (a dry run: it deletes nothing), with the reason per revision
  {self} attach --rollout web -n try-1 --dry-run   # a one-shot attach: already-attached (the service was first)
  rs=$({self} attach --rollout web -n try-1 --dry-run | sed -n 's|.*ReplicaSet try-1/\([^:]*\):.*|\1|p')   # its current ReplicaSet
  curl -s -X POST http://{http}/ -H 'Content-Type: application/json' \
    -d '{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":"try-1","name":"'"$rs"'"}}'; echo
                                     # the HTTP receiver: the answer says what was done (already-attached)
  curl -s http://{ops}/metrics | grep '^configmap_attacher_events_total'

A canary of your own, and the old Job's exact form (a ConfigMap without the opt-in label;
these steps need kubectl, which this repository does not build):
  kubectl create namespace try-2
  kubectl -n try-2 create configmap app-config-1 --from-literal=color=blue
  kubectl -n try-2 apply -f {example}   # Rollout app on app-config-1
  {self} status -n try-2             # app-config-1: referenced but not opted in, with the fix
  {self} -rollout app -namespace try-2 -configmaps app-config-1   # the old Job: attaches by name, no label needed
  kubectl -n try-2 create configmap app-config-2 --from-literal=color=green
  kubectl -n try-2 patch rollout app --type=json -p '[{"op":"replace","path":"/spec/template/spec/volumes/0/configMap/name","value":"app-config-2"}]'
  {self} -rollout app -namespace try-2 -configmaps app-config-2   # waits (saying for what) for the canary's ReplicaSet, attaches to it alone
  {plugin} -n try-2 abort app        # the stable ReplicaSet keeps app-config-1
  {self} status -n try-2

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
	env, err := devenv.Start(ctx, devenv.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Logger: log, Progress: progress})
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
