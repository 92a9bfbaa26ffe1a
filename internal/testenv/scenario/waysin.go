package scenario

import (
	"path/filepath"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// The ways in beside the built-in watcher: the real Argo Events EventSource (narrowed to
// the scenario's namespace) publishing to a NATS JetStream EventBus, then either the
// shipped Sensor calling the service's gRPC custom trigger, or the service's direct
// EventBus subscription.

// EventBus starts a NATS JetStream server (the EventBus) for the scenario.
func (w *World) EventBus() *natsserver.Server {
	w.T.Helper()
	bus, err := natsserver.Start(w.Ctx, natsserver.Options{})
	if err != nil {
		w.T.Fatalf("start NATS: %v", err)
	}
	w.T.Cleanup(bus.Stop)
	return bus
}

// Shipped loads the EventSource and Sensors this project ships, the EventSource narrowed
// to the scenario's namespace.
func (w *World) Shipped() argoevents.Shipped {
	w.T.Helper()
	root, err := argoevents.RepoRoot()
	if err != nil {
		w.T.Fatal(err)
	}
	objs, err := argoevents.LoadShipped(root)
	if err != nil {
		w.T.Fatal(err)
	}
	argoevents.SetWatchedNamespace(objs.EventSource, w.NS)
	return objs
}

// ServeArgoSensor runs the real EventSource and the shipped gRPC Sensor (its trigger
// spec extended with spec, e.g. includeSecrets) aimed at the service, which runs with o
// and no watcher: EventSource -> EventBus -> Sensor -> custom trigger.
func (w *World) ServeArgoSensor(o server.Options, spec map[string]string) {
	w.T.Helper()
	srv := w.Serve(server.Ingress{}, o)
	bus := w.EventBus()
	s := w.Shipped().GRPCSensor
	argoevents.SetCustomTriggerServer(s, srv.GRPCAddr())
	for _, tr := range s.Spec.Triggers {
		if tr.Template != nil && tr.Template.CustomTrigger != nil {
			for k, v := range spec {
				tr.Template.CustomTrigger.Spec[k] = v
			}
		}
	}
	pipe, err := argoevents.StartPipeline(w.Ctx, argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: w.Plane.Kubeconfig(),
		Namespace: w.NS, Sensors: []*v1alpha1.Sensor{s}, LogDir: w.T.TempDir()})
	if err != nil {
		w.T.Fatalf("start Argo Events: %v", err)
	}
	w.KeepLogs(pipe.Processes)
	w.T.Cleanup(func() { _ = pipe.Stop() })
}

// ServeArgoEventBus runs the real EventSource publishing to the EventBus, and the
// service's direct subscription to it (serve --eventbus-url): no Sensor.
func (w *World) ServeArgoEventBus() {
	w.T.Helper()
	bus := w.EventBus()
	es := w.Shipped().EventSource
	p, err := argoevents.Start(w.Ctx, argoevents.Config{EventSource: es, EventBusURL: bus.ClientURL(), Kubeconfig: w.Plane.Kubeconfig(),
		LogFile: filepath.Join(w.T.TempDir(), "eventsource.log")})
	if err != nil {
		w.T.Fatalf("start the EventSource: %v", err)
	}
	w.KeepLogs([]*argoevents.Process{p})
	w.T.Cleanup(func() { _ = p.Stop() })
	if err := p.WaitForLog(w.Ctx, argoevents.EventSourceReadyLog); err != nil {
		w.T.Fatalf("%v\n%s", err, p.Tail(40))
	}
	w.Serve(server.Ingress{EventBus: &eventbus.SubscriberOptions{URL: bus.ClientURL(), TLS: eventbus.TLS{CAFile: bus.CAFile()},
		EventSourceName: es.Name}}, server.Options{})
}

// KeepLogs prints the processes' logs if the test fails.
func (w *World) KeepLogs(procs []*argoevents.Process) {
	w.T.Cleanup(func() {
		if w.T.Failed() {
			for _, p := range procs {
				w.T.Logf("---- %s log (%s) ----\n%s", p.Name(), p.LogFile(), p.Tail(60))
			}
		}
	})
}
