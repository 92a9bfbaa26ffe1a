// Package devenv is the embedded default behind `make run` and `make demo`: a real local
// control plane (internal/testenv/controlplane) with its workloads (kube-scheduler, kwok with a
// fake Node on which Pods turn Running and Ready, the Argo Rollouts controller), an
// embedded NATS JetStream server standing in for the Argo Events EventBus, the
// configmap-attacher service with every ingress path live (gRPC custom trigger, HTTP
// receiver, EventBus subscription, built-in watcher) and an in-process publisher of
// ReplicaSet events to that EventBus in the Argo Events format.
package devenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// Options configure Start.
type Options struct {
	// GRPCAddr, HTTPAddr and MetricsAddr (the ops listener: /healthz, /readyz, /metrics)
	// are the service's listen addresses; defaults 127.0.0.1:9000, 127.0.0.1:8080 and
	// 127.0.0.1:8081 (port 0 picks free ports, as tests do).
	GRPCAddr, HTTPAddr, MetricsAddr string
	// Logger receives the service's logs.
	Logger *slog.Logger
	// Progress receives start-up progress lines; nil means silent.
	Progress func(format string, args ...any)
	// WayIn is the way ReplicaSet events come in besides gRPC and HTTP (which only
	// answer what is sent to them): WayInWatcher (the default), WayInEventBus (the
	// in-process publisher through NATS to the EventBus subscription), or WayInAll (both,
	// so each ReplicaSet is handled twice).
	WayIn string
}

// The ways in Options.WayIn selects.
const (
	WayInWatcher  = "watcher"
	WayInEventBus = "eventbus"
	WayInAll      = "all"
)

// ValidWayIn checks a way in; "" is the watcher.
func ValidWayIn(w string) error {
	switch w {
	case "", WayInWatcher, WayInEventBus, WayInAll:
		return nil
	}
	return fmt.Errorf("way in %q: want %s, %s or %s", w, WayInWatcher, WayInEventBus, WayInAll)
}

// Env is a running embedded default.
type Env struct {
	CP     *controlplane.ControlPlane
	NATS   *natsserver.Server
	Server *server.Server
	opts   Options
	source *eventsource.Source
	nc     *nats.Conn
}

// The EventBus names the embedded default uses, as the shipped EventSource does.
const (
	EventSourceName = "replicasets"
	EventName       = "replicaset-add"
)

// Start starts the control plane, NATS and the service (bound, not yet serving: call
// Run). On error everything started is stopped.
func Start(ctx context.Context, o Options) (_ *Env, err error) {
	if o.GRPCAddr == "" {
		o.GRPCAddr = "127.0.0.1:9000"
	}
	if o.HTTPAddr == "" {
		o.HTTPAddr = "127.0.0.1:8080"
	}
	if o.MetricsAddr == "" {
		o.MetricsAddr = "127.0.0.1:8081"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	if err := ValidWayIn(o.WayIn); err != nil {
		return nil, err
	}
	if o.WayIn == "" {
		o.WayIn = WayInWatcher
	}
	if err := portsFree(o.GRPCAddr, o.HTTPAddr, o.MetricsAddr); err != nil {
		return nil, err
	}
	e := &Env{opts: o}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	o.Progress("starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok, Argo Rollouts controller)...")
	if e.CP, err = controlplane.Start(ctx, controlplane.Options{Name: "local", Logf: o.Progress, Workloads: true}); err != nil {
		return nil, err
	}
	o.Progress("starting NATS JetStream (the EventBus)...")
	if e.NATS, err = natsserver.Start(ctx, natsserver.Options{}); err != nil {
		return nil, err
	}
	if e.Server, err = server.New(e.CP.RESTConfig(), server.Options{GRPCAddr: o.GRPCAddr, HTTPAddr: o.HTTPAddr, MetricsAddr: o.MetricsAddr,
		ClusterName: "in-cluster", Logger: o.Logger, Ingress: e.Ingress()}); err != nil {
		return nil, err
	}
	if e.nc, err = e.NATS.Connect(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		return nil, err
	}
	// What the Argo Events EventBus controller creates in a cluster.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: eventbus.DefaultStream, Subjects: []string{eventbus.SubjectPrefix + ">"},
		MaxAge: 168 * time.Hour, Duplicates: 5 * time.Minute}); err != nil {
		return nil, fmt.Errorf("creating the EventBus stream: %w", err)
	}
	clients, err := kube.NewClients(e.CP.RESTConfig())
	if err != nil {
		return nil, err
	}
	if e.source, err = eventsource.NewSource(clients.Kube, &eventsource.Publisher{JS: js}, eventsource.SourceOptions{
		EventSourceName: EventSourceName, EventName: EventName, Metadata: map[string]string{"cluster": "in-cluster"},
		Logger: o.Logger}); err != nil {
		return nil, err
	}
	return e, nil
}

// FreePortsArgs are the dev flags that run a second make run on free ports.
const FreePortsArgs = "--grpc-addr 127.0.0.1:0 --http-addr 127.0.0.1:0 --metrics-addr 127.0.0.1:0"

// ErrPortTaken means a listen address of the service is in use (a second make run).
var ErrPortTaken = errors.New("port taken")

// portsFree fails at once when a listen address is in use, before the control plane
// starts (a second make run would otherwise start one and then fail): the error says how
// to run a second one.
func portsFree(addrs ...string) error {
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("%w: %s is in use (is another make run running?): %w; stop it, or run this one on free ports: "+
				"make run ARGS=\""+FreePortsArgs+"\" (./bin/configmap-attacher-dev dev "+FreePortsArgs+")", ErrPortTaken, a, err)
		}
		if err := l.Close(); err != nil {
			return err
		}
	}
	return nil
}

// Ingress is what the embedded default runs next to gRPC and HTTP: the way in of
// Options.WayIn (the watcher, or the EventBus subscription fed by the in-process
// publisher, or both) and the periodic sweep.
func (e *Env) Ingress() server.Ingress {
	in := server.Ingress{GC: &server.GCOptions{Interval: time.Minute, Options: gc.DefaultOptions()}}
	in.Watch = e.opts.WayIn != WayInEventBus
	if e.opts.WayIn != WayInWatcher {
		in.EventBus = &eventbus.SubscriberOptions{URL: e.NATS.ClientURL(), TLS: eventbus.TLS{CAFile: e.NATS.CAFile()},
			EventSourceName: EventSourceName, EventName: EventName}
	}
	return in
}

// Run serves until ctx ends, then stops everything. It returns nil on a clean stop.
func (e *Env) Run(ctx context.Context) error {
	defer e.Stop()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.Server.Run(gctx) })
	g.Go(func() error { return e.source.Run(gctx) })
	err := g.Wait()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Stop stops NATS and the control plane. It is safe to call more than once.
func (e *Env) Stop() {
	if e.nc != nil {
		e.nc.Close()
	}
	if e.NATS != nil {
		e.NATS.Stop()
	}
	if e.CP != nil {
		_ = e.CP.Stop()
	}
}
