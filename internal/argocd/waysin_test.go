package argocd_test

import (
	"path/filepath"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	"github.com/configmap-attacher/configmap-attacher/internal/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// The ways in beside the built-in watcher, as internal/acceptance starts them: the
// real Argo Events EventSource (narrowed to the scenario's namespace) publishing to a
// NATS JetStream EventBus, then either the shipped Sensor calling the service's gRPC
// trigger, or the service's direct EventBus subscription.

func (w *world) eventBus() *natsserver.Server {
	w.t.Helper()
	bus, err := natsserver.Start(w.ctx, natsserver.Options{})
	if err != nil {
		w.t.Fatalf("start NATS: %v", err)
	}
	w.t.Cleanup(bus.Stop)
	return bus
}

func (w *world) shipped() argoevents.Shipped {
	w.t.Helper()
	root, err := argoevents.RepoRoot()
	if err != nil {
		w.t.Fatal(err)
	}
	objs, err := argoevents.LoadShipped(root)
	if err != nil {
		w.t.Fatal(err)
	}
	argoevents.SetWatchedNamespace(objs.EventSource, w.ns)
	return objs
}

// serveArgoSensor: EventSource -> EventBus -> the shipped gRPC Sensor -> the service's
// custom trigger (no watcher).
func (w *world) serveArgoSensor() {
	w.t.Helper()
	srv := w.serve(server.Ingress{})
	bus := w.eventBus()
	s := w.shipped().GRPCSensor
	argoevents.SetCustomTriggerServer(s, srv.GRPCAddr())
	pipe, err := argoevents.StartPipeline(w.ctx, argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: cp.Kubeconfig(),
		Namespace: w.ns, Sensors: []*v1alpha1.Sensor{s}, LogDir: w.t.TempDir()})
	if err != nil {
		w.t.Fatalf("start Argo Events: %v", err)
	}
	w.keepLogs(pipe.Processes)
	w.t.Cleanup(func() { _ = pipe.Stop() })
}

// serveArgoEventBus: EventSource -> EventBus -> the service's direct subscription.
func (w *world) serveArgoEventBus() {
	w.t.Helper()
	bus := w.eventBus()
	es := w.shipped().EventSource
	p, err := argoevents.Start(w.ctx, argoevents.Config{EventSource: es, EventBusURL: bus.ClientURL(), Kubeconfig: cp.Kubeconfig(),
		LogFile: filepath.Join(w.t.TempDir(), "eventsource.log")})
	if err != nil {
		w.t.Fatalf("start the EventSource: %v", err)
	}
	w.keepLogs([]*argoevents.Process{p})
	w.t.Cleanup(func() { _ = p.Stop() })
	if err := p.WaitForLog(w.ctx, argoevents.EventSourceReadyLog); err != nil {
		w.t.Fatalf("%v\n%s", err, p.Tail(40))
	}
	w.serve(server.Ingress{EventBus: &eventbus.SubscriberOptions{URL: bus.ClientURL(), TLS: eventbus.TLS{CAFile: bus.CAFile()},
		EventSourceName: es.Name}})
}

func (w *world) keepLogs(procs []*argoevents.Process) {
	w.t.Cleanup(func() {
		if w.t.Failed() {
			for _, p := range procs {
				w.t.Logf("---- %s log (%s) ----\n%s", p.Name(), p.LogFile(), p.Tail(60))
			}
		}
	})
}
