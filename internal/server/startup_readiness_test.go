package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// heldLists holds a cluster's LIST of ReplicaSets (its caches' start-up list) until
// released, while every other request, the health probe's GET /readyz among them,
// goes through: a cluster that answers but is slow to sync.
type heldLists struct{ release chan struct{} }

func (h heldLists) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicasets") && r.URL.Query().Get("watch") == "" {
			select {
			case <-h.release:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
		return next.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A cluster known at start whose caches are slow to sync keeps /readyz at 503 while the
// default cluster is in sync, saying to anyone how many clusters it waits for and, with
// the token, which; /readyz turns 200 once that cluster syncs, or at the start-up
// deadline if it never does, and stays 200 after.
func TestReadyzWaitsForEveryClusterKnownAtStartUntilItSyncsOrTheDeadline(t *testing.T) {
	const token = "startup-token"
	for _, tt := range []struct {
		name     string
		deadline time.Duration
		// release lets the held cluster list once /readyz was seen 503 with the default in sync.
		release bool
		// wantSlowSynced: whether the held cluster is in sync when /readyz turns 200.
		wantSlowSynced bool
	}{
		{name: "the held cluster syncs: ready then", deadline: 10 * time.Minute, release: true, wantSlowSynced: true},
		{name: "the held cluster never syncs: ready at the deadline", deadline: 8 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := controlplane.Require(t, cp).RESTConfig()
			held := heldLists{release: make(chan struct{})}
			released := false
			slow := rest.CopyConfig(base)
			slow.WrapTransport = held.wrap
			ro := cluster.Options{Clusters: []cluster.Spec{
				{Name: "home", Source: cluster.SourceHome, Origin: "test", Config: base},
				{Name: "slow", Source: cluster.SourceKubeconfig, Origin: "test", Config: slow},
			}, ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second}
			srv, err := server.New(nil, server.Options{Clusters: &ro, GRPCAddr: "-", HTTPAddr: "-", MetricsAddr: "127.0.0.1:0",
				HTTPToken: []byte(token), Logger: logger(t), ShutdownTimeout: 5 * time.Second, StartupDeadline: tt.deadline})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			t.Cleanup(func() {
				cancel()
				if !released {
					close(held.release) // a list still held ends with the rest
				}
				assert.NoError(t, <-done)
			})
			addr := srv.MetricsAddr()

			controlplane.Eventually(t, 30*time.Second, "the default cluster in sync", func() error {
				if !srv.Clusters().Healthy("home") {
					return errors.New("home not in sync yet")
				}
				return nil
			})
			if !srv.Ready() {
				code, body := opsGet(t, addr, "/readyz", "")
				assert.Equal(t, http.StatusServiceUnavailable, code)
				assert.Equal(t, "not ready\nstarting: 1 of 2 clusters known at start not in sync yet", strings.SplitN(body, " (", 2)[0],
					"anyone reads how many clusters it waits for, no names: %s", body)
				_, body = opsGet(t, addr, "/readyz", token)
				assert.Contains(t, body, "still starting (caches not in sync): slow\n", "the token shows which")
			} else {
				require.False(t, tt.release, "ready with a cluster held and no deadline passed")
			}
			assert.False(t, srv.Clusters().Healthy("slow"), "the held cluster has not synced")
			if tt.release {
				assert.False(t, srv.Ready(), "the held cluster holds readiness")
				close(held.release)
				released = true
			}

			controlplane.Eventually(t, 60*time.Second, "/readyz 200", func() error {
				if code, body := opsGet(t, addr, "/readyz", token); code != http.StatusOK {
					return fmt.Errorf("/readyz %d: %s", code, body)
				}
				return nil
			})
			assert.Equal(t, tt.wantSlowSynced, srv.Clusters().Healthy("slow"), "the held cluster's sync when ready")
			code, body := opsGet(t, addr, "/readyz", "")
			assert.Equal(t, http.StatusOK, code)
			assert.Equal(t, "ok\n", body, "once start-up is over, no summary line")
			code, body = opsGet(t, addr, "/readyz", token)
			assert.Equal(t, http.StatusOK, code, "start-up is over for good: %s", body)
			assert.NotContains(t, body, "still starting")
		})
	}
}

// forbiddenLists answers every LIST of ReplicaSets with 403, as an apiserver does to a
// cluster Secret's service account lacking the RBAC to list them, while the health
// probe's GET /readyz (readable by anyone) passes.
func forbiddenLists(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/replicasets") {
			body := `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,` +
				`"message":"replicasets.apps is forbidden: User \"system:serviceaccount:argocd:x\" cannot list resource \"replicasets\""}`
			return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Request: r,
				Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
		}
		return next.RoundTrip(r)
	})
}

// A cluster known at start whose lists are refused (403: its RBAC is missing) is as
// started as one that is down: waiting for it can make nothing ready, so it does not
// hold /readyz until the start-up deadline at every restart; the token's detail says
// it is not in sync.
func TestReadyzDoesNotWaitForAClusterRefusingItsListsAtStart(t *testing.T) {
	t.Skip("finding: a cluster answering its probe but refusing every list (403) holds /readyz until the start-up deadline (30 s at each restart); the gate knows only probe failures as down")
	const token = "startup-token"
	base := controlplane.Require(t, cp).RESTConfig()
	refused := rest.CopyConfig(base)
	refused.WrapTransport = forbiddenLists
	ro := cluster.Options{Clusters: []cluster.Spec{
		{Name: "home", Source: cluster.SourceHome, Origin: "test", Config: base},
		{Name: "refused", Source: cluster.SourceKubeconfig, Origin: "test", Config: refused},
	}, ProbeInterval: 200 * time.Millisecond, ProbeTimeout: time.Second}
	srv, err := server.New(nil, server.Options{Clusters: &ro, GRPCAddr: "-", HTTPAddr: "-", MetricsAddr: "127.0.0.1:0",
		HTTPToken: []byte(token), Logger: logger(t), ShutdownTimeout: 5 * time.Second, StartupDeadline: 10 * time.Minute})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	controlplane.Eventually(t, 30*time.Second, "/readyz 200 with the refused cluster not in sync", func() error {
		if code, body := opsGet(t, srv.MetricsAddr(), "/readyz", token); code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	_, body := opsGet(t, srv.MetricsAddr(), "/readyz", token)
	assert.Contains(t, body, "refused DOWN:", "the token's detail says the refused cluster is not serving")
}
