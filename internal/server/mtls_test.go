package server_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestServeMutualTLS: with a client CA, gRPC and HTTP accept only clients presenting a
// certificate signed by it; no certificate, or one from another CA, is refused at the
// handshake.
func TestServeMutualTLS(t *testing.T) {
	controlplane.Require(t, cp)
	dir := t.TempDir()
	ca, rogue := testfix.NewCA(t, "clients-ca"), testfix.NewCA(t, "rogue-ca")
	srvCert, srvKey := ca.Issue(t, "configmap-attacher", x509.ExtKeyUsageServerAuth)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	opts := server.Options{TLSCertFile: write("tls.crt", srvCert), TLSKeyFile: write("tls.key", srvKey), TLSClientCAFile: write("ca.crt", ca.PEM)}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	pair := func(c *testfix.CA) []tls.Certificate {
		cp, kp := c.Issue(t, "sensor", x509.ExtKeyUsageClientAuth)
		cert, err := tls.X509KeyPair(cp, kp)
		require.NoError(t, err)
		return []tls.Certificate{cert}
	}
	good := &tls.Config{RootCAs: roots, Certificates: pair(ca)}
	s := startServer(t, opts, nil, "https", &http.Client{Transport: &http.Transport{TLSClientConfig: good}})
	_, port, _ := net.SplitHostPort(s.GRPCAddr())

	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"client certificate from the CA", good, true},
		{"no client certificate", &tls.Config{RootCAs: roots}, false},
		{"client certificate from another CA", &tls.Config{RootCAs: roots, Certificates: pair(rogue)}, false},
	} {
		t.Run("http/"+tc.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.cfg}, Timeout: 5 * time.Second}
			resp, err := c.Get("https://" + s.HTTPAddr() + "/healthz")
			if tc.ok {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				return
			}
			if err == nil {
				resp.Body.Close()
			}
			assert.Error(t, err, "refused at the handshake")
		})
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(credentials.NewTLS(tc.cfg)))
			require.NoError(t, err)
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = triggers.NewTriggerClient(conn).FetchResource(ctx, &triggers.FetchResourceRequest{Resource: []byte("dryRun: true")})
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err, "refused at the handshake")
			}
		})
	}
}
