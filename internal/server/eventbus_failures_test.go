package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// runWithBus starts a server against the control plane with the given EventBus options
// and returns its HTTP address, its Run result channel and its cancel. The caller
// owns shutdown (cancel, then read done).
func runWithBus(t *testing.T, eb eventbus.SubscriberOptions) (addr string, done <-chan error, cancel context.CancelFunc) {
	t.Helper()
	c := controlplane.Require(t, cp)
	srv, err := server.New(c.RESTConfig(), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", Logger: logger(t),
		ShutdownTimeout: 5 * time.Second, ProbeInterval: 200 * time.Millisecond, Ingress: server.Ingress{EventBus: &eb},
		HTTPToken: []byte(detailToken)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan error, 1)
	go func() { ch <- srv.Run(ctx) }()
	return srv.HTTPAddr(), ch, cancel
}

// detailToken is the bearer token of the tests' servers that read /readyz's detail
// (it is shown only to a request carrying the token).
const detailToken = "readyz-detail"

func getReadyz(addr string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+detailToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stopWithin cancels serve and requires Run to return nil within d.
func stopWithin(t *testing.T, cancel context.CancelFunc, done <-chan error, d time.Duration) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err, "a shutdown is clean")
	case <-time.After(d):
		t.Fatalf("serve did not return within %s of its context ending", d)
	}
}

// TestEventBusWrongTokenEndsServe: an EventBus that answers but refuses the
// credentials is a configuration error: serve ends with an error saying so, it does not
// keep retrying (and stay unready) forever.
func TestEventBusWrongTokenEndsServe(t *testing.T) {
	controlplane.Require(t, cp)
	bus, err := natsserver.Start(context.Background(), natsserver.Options{Token: "right-token", StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(bus.Stop)
	_, done, cancel := runWithBus(t, eventbus.SubscriberOptions{URL: bus.ClientURL(), Auth: eventbus.Auth{Token: "wrong-token"},
		TLS: eventbus.TLS{CAFile: bus.CAFile()}, CreateStream: true})
	defer cancel()
	select {
	case err := <-done:
		require.Error(t, err, "serve must fail on refused credentials")
		assert.Contains(t, strings.ToLower(err.Error()), "authorization", "the error says why: %v", err)
		assert.NotContains(t, err.Error(), "wrong-token", "the error does not leak the token")
	case <-time.After(60 * time.Second):
		t.Fatal("serve kept running with an EventBus that refuses its credentials")
	}
}

// TestShutdownWhileEventBusDownIsPrompt: while the EventBus is down (nothing listens on its
// port) serve is running, not ready (503 naming the EventBus), and a shutdown returns
// promptly and cleanly although the subscriber never connected.
func TestShutdownWhileEventBusDownIsPrompt(t *testing.T) {
	controlplane.Require(t, cp)
	bus, err := natsserver.Start(context.Background(), natsserver.Options{Token: "bus-token", StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(bus.Stop)
	bus.Shutdown()
	addr, done, cancel := runWithBus(t, eventbus.SubscriberOptions{URL: bus.ClientURL(), Auth: eventbus.Auth{Token: "bus-token"},
		TLS: eventbus.TLS{CAFile: bus.CAFile()}, CreateStream: true})
	defer cancel()
	controlplane.Eventually(t, 30*time.Second, "/readyz 503 naming the EventBus", func() error {
		select {
		case err := <-done:
			t.Fatalf("serve exited while the EventBus is down: %v", err)
		default:
		}
		// The default cluster itself is fine: the only reason for 503 is the EventBus.
		if code, body := getReadyz(addr); code != http.StatusServiceUnavailable || !strings.Contains(body, "EventBus: connecting") ||
			!strings.Contains(body, "(default) ok\n") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	// It stays so over several retry rounds (0.5 s, 1 s, 2 s).
	time.Sleep(4 * time.Second)
	code, body := getReadyz(addr)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	select {
	case err := <-done:
		t.Fatalf("serve exited while the EventBus is down: %v", err)
	default:
	}
	stopWithin(t, cancel, done, 20*time.Second)
}

// TestEventBusUnresolvableAtStartIsRetried: in Kubernetes the EventBus Service
// (eventbus-default-js-svc) may not exist yet when serve starts (Argo Events creates
// it), so its name does not resolve. That is "not reachable yet", like a refused
// connection: serve must keep running, unready, and retry; it must not end.
func TestEventBusUnresolvableAtStartIsRetried(t *testing.T) {
	controlplane.Require(t, cp)
	addr, done, cancel := runWithBus(t, eventbus.SubscriberOptions{URL: "nats://eventbus-default-js-svc.argo-events.svc.invalid:4222",
		Auth: eventbus.Auth{Token: "bus-token"}, TLS: eventbus.TLS{Disable: true}, CreateStream: true})
	defer cancel()
	controlplane.Eventually(t, 30*time.Second, "/readyz 503 naming the EventBus", func() error {
		if code, body := getReadyz(addr); code != http.StatusServiceUnavailable || !strings.Contains(body, "EventBus") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	// Several retry rounds (0.5 s, 1 s, 2 s ...) later serve is still running.
	select {
	case err := <-done:
		t.Fatalf("serve ended instead of retrying an EventBus whose name does not resolve yet: %v", err)
	case <-time.After(4 * time.Second):
	}
	stopWithin(t, cancel, done, 20*time.Second)
}
