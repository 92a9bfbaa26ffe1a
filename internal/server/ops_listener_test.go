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

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// opsGet sends GET path to addr with the bearer token when token is set.
func opsGet(t *testing.T, addr, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runOps starts a server with the ops listener on loopback and returns it once its
// /readyz (on the ops listener) answers 200.
func runOps(t *testing.T, o server.Options) *server.Server {
	t.Helper()
	o.MetricsAddr, o.Logger, o.ShutdownTimeout = "127.0.0.1:0", logger(t), 5*time.Second
	srv, err := server.New(controlplane.Require(t, cp).RESTConfig(), o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })
	controlplane.Eventually(t, 30*time.Second, "/readyz on the ops listener", func() error {
		if code, body := opsGet(t, srv.MetricsAddr(), "/readyz", ""); code != 200 {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	return srv
}

// With the HTTP receiver off, the probes and the scrape stay on the ops listener, with
// the token's rules: probes without it (/readyz's detail only with it), /metrics and
// pprof only with it.
func TestOpsListenerServesProbesWithTheReceiverOff(t *testing.T) {
	const token = "ops-token"
	srv := runOps(t, server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "-", HTTPToken: []byte(token), Pprof: true})
	require.Empty(t, srv.HTTPAddr(), "the receiver is off")
	addr := srv.MetricsAddr()
	for _, tc := range []struct {
		name, path, token string
		code              int
		has, hasNot       string
	}{
		{name: "liveness", path: "/healthz", code: 200, has: "ok"},
		{name: "readiness without the detail", path: "/readyz", code: 200, hasNot: "in-cluster"},
		{name: "readiness with the detail", path: "/readyz", token: token, code: 200, has: "in-cluster"},
		{name: "metrics need the token", path: "/metrics", code: 401},
		{name: "metrics scrape", path: "/metrics", token: token, code: 200, has: "configmap_attacher_cluster_up"},
		{name: "pprof needs the token", path: "/debug/pprof/", code: 401},
		{name: "pprof", path: "/debug/pprof/heap?debug=1", token: token, code: 200, has: "heap profile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := opsGet(t, addr, tc.path, tc.token)
			assert.Equal(t, tc.code, code, body)
			if tc.has != "" {
				assert.True(t, strings.Contains(body, tc.has), "%s holds %q", tc.path, tc.has)
			}
			if tc.hasNot != "" {
				assert.NotContains(t, body, tc.hasNot)
			}
			assert.NotContains(t, body, token)
		})
	}
}

// For one release the receiver's port still answers the probes and the scrape, with the
// same rules as the ops listener's (CHANGELOG.md, 0.4.x: deprecated, removed in 0.5.0).
func TestReceiverKeepsTheOpsPathsForOneRelease(t *testing.T) {
	const token = "ops-token"
	srv := runOps(t, server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", HTTPToken: []byte(token)})
	for _, addr := range []string{srv.MetricsAddr(), srv.HTTPAddr()} {
		code, _ := opsGet(t, addr, "/readyz", "")
		assert.Equal(t, 200, code, addr)
		code, _ = opsGet(t, addr, "/metrics", "")
		assert.Equal(t, 401, code, addr)
		code, body := opsGet(t, addr, "/metrics", token)
		assert.Equal(t, 200, code, addr)
		assert.True(t, strings.Contains(body, "configmap_attacher_cluster_up"), "%s: the scrape holds the service's metrics", addr)
	}
	code, _ := opsGet(t, srv.HTTPAddr(), "/debug/pprof/", token)
	assert.NotEqual(t, 200, code, "pprof is never on the receiver")
}
