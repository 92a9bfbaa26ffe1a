package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestMetricsKeepTheClientCertificateWhenMutualTLSIsTheGuard: a service guarded by
// mutual TLS alone (--tls-client-ca-file, no --http-token-file) served /metrics only to
// clients with a certificate from the CA (on the receiver's port); the ops listener,
// which asks for no client certificate so that the kubelet's probes pass, must not hand
// the scrape (cluster names, servers, refused Secrets and their conflicts) to any caller
// that reaches :8081. The probes stay open.
func TestMetricsKeepTheClientCertificateWhenMutualTLSIsTheGuard(t *testing.T) {
	controlplane.Require(t, cp)
	dir := t.TempDir()
	ca := testfix.NewCA(t, "clients-ca")
	srvCert, srvKey := ca.Issue(t, "configmap-attacher", x509.ExtKeyUsageServerAuth)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	o := server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Logger: logger(t), ShutdownTimeout: 5 * time.Second,
		TLSCertFile: write("tls.crt", srvCert), TLSKeyFile: write("tls.key", srvKey), TLSClientCAFile: write("ca.crt", ca.PEM)}
	srv, err := server.New(cp.RESTConfig(), o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); assert.NoError(t, <-done) })

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	anyone := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 5 * time.Second}
	get := func(addr, path string) (int, error) {
		resp, err := anyone.Get("https://" + addr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, nil
	}
	controlplane.Eventually(t, 30*time.Second, "/readyz on the ops listener without a certificate", func() error {
		if code, err := get(srv.MetricsAddr(), "/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %v", code, err)
		}
		return nil
	})
	code, err := get(srv.MetricsAddr(), "/healthz")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code, "the liveness probe needs no certificate")

	_, err = get(srv.HTTPAddr(), "/metrics")
	assert.Error(t, err, "the receiver's /metrics: refused at the handshake without a certificate")
	code, err = get(srv.MetricsAddr(), "/metrics")
	assert.True(t, err != nil || code == http.StatusUnauthorized || code == http.StatusForbidden,
		"the ops listener's /metrics without a client certificate: HTTP %d (err %v)", code, err)
}
