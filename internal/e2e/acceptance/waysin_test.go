package acceptance_test

import (
	"bytes"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/dev/demo"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// Scenario 8. The same canary — the demo's: revision 1 stable, a canary of revision 2
// paused, a spot replacement of a stable Pod, promote, revision 3 pushing the first
// ReplicaSet out of history and its revision collected, undo, an aborted canary, a
// consistent end — fed through each way in: the built-in watcher, the real Argo Events
// EventSource and Sensor to the gRPC custom trigger, and the real EventSource through
// the EventBus to the service's direct subscription.
func TestWaysIn(t *testing.T) {
	tests := []struct {
		name  string
		start func(w *world)
	}{
		{"built-in watcher (serve --watch)", func(w *world) { w.ServeWatcher() }},
		{"Argo Events EventSource and Sensor to the gRPC custom trigger", func(w *world) { w.ServeArgoSensor(server.Options{}, nil) }},
		{"Argo Events EventSource through the EventBus to the direct subscription", func(w *world) { w.ServeArgoEventBus() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newBareWorld(t) // the demo creates the namespace
			tc.start(w)
			var out bytes.Buffer
			err := demo.Run(w.Ctx, w.Kube, w.Dynamic, &out, demo.Options{Namespace: w.NS})
			t.Logf("demo timeline:\n%s", out.String())
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
