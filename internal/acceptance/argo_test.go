package acceptance_test

import (
	"path/filepath"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	"github.com/configmap-attacher/configmap-attacher/internal/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// eventBus starts a NATS JetStream server (the EventBus) for this test.
func (w *world) eventBus() *natsserver.Server {
	w.t.Helper()
	bus, err := natsserver.Start(w.ctx, natsserver.Options{})
	if err != nil {
		w.t.Fatalf("start NATS: %v", err)
	}
	w.t.Cleanup(bus.Stop)
	return bus
}

// shipped loads the EventSource and Sensors this project ships, the EventSource narrowed
// to the test's namespace.
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

// serveArgoSensor runs the real Argo Events EventSource and the shipped gRPC Sensor
// (its trigger spec extended with spec, e.g. includeSecrets) aimed at the service, which
// serves gRPC only: the path is EventSource -> EventBus -> Sensor -> custom trigger.
func (w *world) serveArgoSensor(o server.Options, spec map[string]string) {
	w.t.Helper()
	srv := w.serve(server.Ingress{}, o)
	bus := w.eventBus()
	s := w.shipped().GRPCSensor
	argoevents.SetCustomTriggerServer(s, srv.GRPCAddr())
	for _, tr := range s.Spec.Triggers {
		if tr.Template != nil && tr.Template.CustomTrigger != nil {
			for k, v := range spec {
				tr.Template.CustomTrigger.Spec[k] = v
			}
		}
	}
	logDir := w.t.TempDir()
	pipe, err := argoevents.StartPipeline(w.ctx, argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: cp.Kubeconfig(),
		Namespace: w.ns, Sensors: []*v1alpha1.Sensor{s}, LogDir: logDir})
	if err != nil {
		w.t.Fatalf("start Argo Events: %v", err)
	}
	w.keepLogs(pipe.Processes)
	w.t.Cleanup(func() { _ = pipe.Stop() })
}

// serveArgoEventBus runs the real Argo Events EventSource publishing to the EventBus,
// and the service's direct subscription to it (serve --eventbus-url): no Sensor.
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
		EventSourceName: es.Name}}, server.Options{})
}

// keepLogs prints the processes' logs if the test fails.
func (w *world) keepLogs(procs []*argoevents.Process) {
	w.t.Cleanup(func() {
		if w.t.Failed() {
			for _, p := range procs {
				w.t.Logf("---- %s log (%s) ----\n%s", p.Name(), p.LogFile(), p.Tail(60))
			}
		}
	})
}
