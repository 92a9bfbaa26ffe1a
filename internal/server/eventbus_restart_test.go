package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// TestEventBusDownThenBack: the EventBus (NATS JetStream) is down when serve starts and
// goes down again later. serve does not exit; /readyz answers 503 naming the EventBus
// while it is down and 200 once it is back, by itself; events published after each
// return are attached. Bounded: two NATS restarts, about 20 s.
func TestEventBusDownThenBack(t *testing.T) {
	c := controlplane.Require(t, cp)
	ctx := context.Background()
	kc := c.Client()
	const ns = "eventbus-restart"
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	bus, err := natsserver.Start(ctx, natsserver.Options{Token: "bus-token", StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(bus.Stop)
	// The stream Argo Events' EventBus creates, then the bus goes down before serve starts.
	withJS := func(f func(js jetstream.JetStream)) {
		t.Helper()
		nc, err := bus.Connect(nats.Token("bus-token"))
		require.NoError(t, err)
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(t, err)
		f(js)
	}
	withJS(func(js jetstream.JetStream) {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}, Storage: jetstream.FileStorage})
		require.NoError(t, err)
	})
	bus.Shutdown()

	srv, err := server.New(c.RESTConfig(), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", Logger: logger(t), ShutdownTimeout: 5 * time.Second,
		HTTPToken: []byte(detailToken), PublicMetrics: true, Ingress: server.Ingress{WatchResync: time.Hour, EventBus: &eventbus.SubscriberOptions{URL: bus.ClientURL(),
			Auth: eventbus.Auth{Token: "bus-token"}, TLS: eventbus.TLS{CAFile: bus.CAFile()}, NakDelay: 200 * time.Millisecond}}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- srv.Run(runCtx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	readyz := func() (int, string) { return getReadyz(srv.HTTPAddr()) }
	expect := func(code int, phrase string) {
		t.Helper()
		controlplane.Eventually(t, 30*time.Second, fmt.Sprintf("/readyz %d with %q", code, phrase), func() error {
			select {
			case err := <-done:
				return fmt.Errorf("serve exited: %v", err)
			default:
			}
			if got, body := readyz(); got != code || !strings.Contains(body, phrase) {
				return fmt.Errorf("/readyz %d: %s", got, body)
			}
			return nil
		})
	}
	publishAndWait := func(name string) {
		t.Helper()
		rs := restartWorkload(t, kc, ns, name)
		withJS(func(js jetstream.JetStream) {
			pub := &eventsource.Publisher{JS: js, EventSourceName: "replicasets", EventName: "replicaset-add"}
			require.NoError(t, pub.Publish(ctx, "ADD", rs))
		})
		waitOwned(t, kc, ns, "cfg-"+name, rs)
	}

	expect(http.StatusServiceUnavailable, "EventBus: connecting")
	_, body := readyz()
	t.Logf("EventBus down at start: %s", strings.TrimSpace(body))

	require.NoError(t, bus.Restart(ctx))
	expect(http.StatusOK, "EventBus: subscribed")
	publishAndWait("first")

	bus.Shutdown()
	expect(http.StatusServiceUnavailable, "EventBus: not connected")
	_, body = readyz()
	t.Logf("EventBus gone while serving: %s", strings.TrimSpace(body))

	require.NoError(t, bus.Restart(ctx))
	expect(http.StatusOK, "EventBus: subscribed")
	publishAndWait("second")

	// EventBus events show in the same metrics as trigger events, by cluster.
	controlplane.Eventually(t, 10*time.Second, "eventbus metrics", func() error {
		resp, err := http.Get("http://" + srv.HTTPAddr() + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, want := range []string{`configmap_attacher_events_total{cluster="in-cluster",path="eventbus",result="ok"} 2`,
			`configmap_attacher_objects_total{cluster="in-cluster",outcome="attached"} 2`} {
			if !strings.Contains(string(b), want) {
				return fmt.Errorf("no %s", want)
			}
		}
		return nil
	})
}
